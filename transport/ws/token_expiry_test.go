package ws_test

import (
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/transport/ws"
)

// TestSessionEndsWhenItsTokenExpires: a session that keeps itself alive with pings ends when its
// token expires, with a last ctrl without id naming token_expired and a close 1008, and gets no
// message published after that; its user logs in again on a new connection. Both read modes:
// the sweeper ends a polled session, the read deadline a blocking one.
func TestSessionEndsWhenItsTokenExpires(t *testing.T) {
	t.Parallel()
	for _, blocking := range []bool{false, true} {
		name := "polled"
		if blocking {
			name = "blocking"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			n := c.node(t, "node-a", nodeOpts{cfg: ws.Config{BlockingReads: blocking}})
			short, err := c.tokens.Issue(acme, 1, 3*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			a := dial(t, n, "a", dialOpts{})
			storetest.RegisterUsers(t, c.store, acme, 1)
			if r := a.call("login", `{"login":{"id":"login","token":"`+short+`"}}`); r.Code != 200 {
				t.Fatalf("login = %+v", r)
			}
			a.sub("grp1")
			b := dial(t, n, "b", dialOpts{})
			b.login(c, 2)
			b.sub("grp1")

			stop := make(chan struct{})
			defer close(stop)
			go func() { // keep alive, as a client does
				for {
					select {
					case <-stop:
						return
					case <-a.done:
						return
					case <-time.After(100 * time.Millisecond):
					}
					_ = a.c.Write(testCtx(t), websocket.MessageText, []byte(`{"ping":{}}`))
				}
			}()
			code, reason := a.closed(8 * time.Second)
			if code != websocket.StatusPolicyViolation || reason != ws.ReasonTokenExpired {
				t.Fatalf("close = %d %q, want 1008 %q", code, reason, ws.ReasonTokenExpired)
			}
			var last *ctrlFrame
			for _, f := range a.snapshot() {
				if f.Ctrl != nil && f.Ctrl.ID == "" && f.Ctrl.Code >= 400 {
					last = f.Ctrl
				}
			}
			if last == nil || last.Code != 401 || last.Reason != ws.ReasonTokenExpired {
				t.Fatalf("last ctrl before the close = %+v, want 401 %s without id", last, ws.ReasonTokenExpired)
			}
			if r := b.call("p", `{"pub":{"id":"p","topic":"grp1","client_msg_id":"c1","content":"after"}}`); r.Code != 202 {
				t.Fatalf("pub = %+v", r)
			}
			if d := a.data(); len(d) != 0 {
				t.Fatalf("the expired session got %d data frames", len(d))
			}
			again := dial(t, n, "a-again", dialOpts{})
			again.login(c, 1)
		})
	}
}
