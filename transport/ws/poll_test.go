package ws_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/transport/ws"
)

// sessionGoroutines counts the goroutines running code of a WebSocket session.
func sessionGoroutines() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "transport/ws.(*session)") {
			n++
		}
	}
	return n
}

// An idle connection holds no goroutine: readiness notification starts a reading round when
// its client sends, and the round ends when nothing is left to read. With blocking reads each
// connection keeps its reader. Either way an idle client that sends again is served.
//
// Not parallel: it counts the process's goroutines, which other tests' sessions would add to.
func TestIdleConnectionsHoldNoGoroutine(t *testing.T) {
	for _, tt := range []struct {
		name     string
		blocking bool
	}{{"polled", false}, {"blocking", true}} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t)
			n := c.node(t, "node-"+tt.name, nodeOpts{cfg: ws.Config{BlockingReads: tt.blocking}})
			const conns = 20
			clients := make([]*client, conns)
			for i := range clients {
				clients[i] = dial(t, n, fmt.Sprint("u", i), dialOpts{})
				clients[i].login(c, userID(100+i))
				clients[i].sub("grp77")
			}
			var got int
			deadline := time.Now().Add(10 * time.Second)
			for {
				got = sessionGoroutines()
				if !tt.blocking && got == 0 || tt.blocking && got >= conns || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if tt.blocking && got < conns {
				t.Errorf("%d session goroutines for %d connections with blocking reads, want one each", got, conns)
			}
			if !tt.blocking && got != 0 {
				t.Errorf("%d session goroutines for %d idle polled connections, want none", got, conns)
			}
			if s := n.gw.Sessions(); s != conns {
				t.Fatalf("%d sessions, want %d", s, conns)
			}
			for i, cl := range clients {
				id := fmt.Sprint("pg", i)
				if r := cl.call(id, fmt.Sprintf(`{"ping":{"id":%q}}`, id)); r.Code != 200 {
					t.Errorf("client %d after idling: ping = %+v", i, r)
				}
			}
			pub := `{"pub":{"id":"p1","topic":"grp77","client_msg_id":"cm-1","content":"after idle"}}`
			if r := clients[0].call("p1", pub); r.Code != 202 {
				t.Fatalf("pub after idling = %+v", r)
			}
			for i, cl := range clients[1:] {
				cl.waitFor(fmt.Sprint("data on client ", i+1), func(fs []serverFrame) bool {
					for _, f := range fs {
						if f.Data != nil && string(f.Data.Content) == `"after idle"` {
							return true
						}
					}
					return false
				})
			}
		})
	}
}
