package ws_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/imledger/imledger/transport/ws"
)

// A node at ws.max_connections turns the next upgrade away with 503 and Retry-After, counts it,
// and admits again once a connection has closed.
func TestMaxConnections(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	n := c.node(t, "node-a", nodeOpts{cfg: ws.Config{MaxConnections: 2}})
	first := dial(t, n, "u1", dialOpts{})
	dial(t, n, "u2", dialOpts{})

	refused := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
		defer cancel()
		conn, resp, err := websocket.Dial(ctx, n.url(), nil)
		if err == nil {
			_ = conn.CloseNow()
			t.Fatal("a third connection was admitted past max_connections 2")
		}
		if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("third connection: %v, response %+v; want 503 with Retry-After", err, resp)
		}
	}
	refused()
	if got := n.counter(t, "imledger_ws_refused_total", map[string]string{"reason": "max_connections"}); got != 1 {
		t.Errorf("refused{reason=max_connections} = %v, want 1", got)
	}
	// A dial returns once the upgrade is answered, a moment before the gateway tracks the session.
	for deadline := time.Now().Add(10 * time.Second); n.gw.Sessions() != 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := n.gw.Sessions(); got != 2 {
		t.Errorf("%d sessions, want the 2 admitted", got)
	}

	if err := first.c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for n.gw.Sessions() > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the closed connection still counts: %d sessions", n.gw.Sessions())
		}
		time.Sleep(10 * time.Millisecond)
	}
	third := dial(t, n, "u3", dialOpts{})
	third.login(c, 3)
	refused()
}
