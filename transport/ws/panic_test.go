package ws_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/imledger/imledger/transport/ws"
)

// chat has a and b, logged in and subscribed to grp1, exchange a message each way and checks that
// both arrive.
func chat(t *testing.T, a, b *client, round string) {
	t.Helper()
	for _, pair := range [][2]*client{{a, b}, {b, a}} {
		from, to := pair[0], pair[1]
		text := fmt.Sprintf("%s from %s", round, from.name)
		if r := from.pub(round+"-"+from.name, "grp1", text); r.Code != 202 {
			t.Fatalf("%s: pub = %+v", from.name, r)
		}
		to.waitFor(text, func([]serverFrame) bool { return slices.Contains(to.contents("grp1"), text) })
	}
}

// TestFramePanicClosesOnlyItsConnection makes the handler of one connection's frames panic: that
// connection is closed with 1011, the panic is counted, and the node's other sessions keep
// sending and receiving, before and after; a new connection is served as usual.
func TestFramePanicClosesOnlyItsConnection(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	n := c.node(t, "node-a", nodeOpts{})
	a, b, victim := dial(t, n, "a", dialOpts{}), dial(t, n, "b", dialOpts{}), dial(t, n, "victim", dialOpts{})
	for i, cl := range []*client{a, b, victim} {
		cl.login(c, userID(i+1))
		cl.sub("grp1")
	}
	chat(t, a, b, "before")
	// Only the victim sends a ping frame.
	ws.SetFrameHook(n.gw, func(typ string) {
		if typ == "ping" {
			panic("injected frame handler panic")
		}
	})
	victim.write(`{"ping":{"id":"boom"}}`)
	if code, reason := victim.closed(10 * time.Second); code != websocket.StatusInternalError {
		t.Fatalf("the panicking connection closed with %d %q, want 1011", code, reason)
	}
	chat(t, a, b, "after")
	if v := n.counter(t, "imledger_panics_total", map[string]string{"component": "ws"}); v != 1 {
		t.Errorf("imledger_panics_total{component=ws} = %v, want 1", v)
	}
	if v := n.counter(t, "imledger_ws_disconnects_total", map[string]string{"cause": "panic"}); v != 1 {
		t.Errorf("disconnects{cause=panic} = %v, want 1", v)
	}
	ws.SetFrameHook(n.gw, nil)
	late := dial(t, n, "late", dialOpts{})
	late.login(c, 9)
	late.sub("grp1")
	chat(t, a, late, "late")
	if got := n.gw.Sessions(); got != 3 {
		t.Errorf("%d sessions open, want 3 (a, b, late)", got)
	}
}

// TestWriterPanicClosesOnlyItsConnection makes one session's writer goroutine panic: that
// connection is cut, the others go on.
func TestWriterPanicClosesOnlyItsConnection(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	n := c.node(t, "node-a", nodeOpts{})
	a, b, victim := dial(t, n, "a", dialOpts{}), dial(t, n, "b", dialOpts{}), dial(t, n, "victim", dialOpts{})
	for i, cl := range []*client{a, b} {
		cl.login(c, userID(i+1))
		cl.sub("grp1")
	}
	victim.login(c, 3)
	var armed atomic.Bool
	armed.Store(true)
	ws.SetWriteHook(n.gw, func() {
		if armed.CompareAndSwap(true, false) {
			panic("injected writer panic")
		}
	})
	// The victim's pong is the next batch any writer writes: a and b are idle.
	victim.write(`{"ping":{"id":"boom"}}`)
	victim.closed(10 * time.Second)
	chat(t, a, b, "after")
	if v := n.counter(t, "imledger_panics_total", map[string]string{"component": "ws"}); v != 1 {
		t.Errorf("imledger_panics_total{component=ws} = %v, want 1", v)
	}
	deadline := time.Now().Add(10 * time.Second)
	for n.gw.Sessions() != 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := n.gw.Sessions(); got != 2 {
		t.Errorf("%d sessions open, want 2", got)
	}
}
