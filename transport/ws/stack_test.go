package ws_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/transport/ws"
)

// stackRecorder is a MessageSender that notes the stack each send runs on.
type stackRecorder struct {
	next ws.MessageSender

	mu     sync.Mutex
	stacks []string
}

func (r *stackRecorder) Handle(ctx context.Context, cmd message.SendMessage) (message.SendResult, error) {
	buf := make([]byte, 64<<10)
	buf = buf[:runtime.Stack(buf, false)]
	r.mu.Lock()
	r.stacks = append(r.stacks, string(buf))
	r.mu.Unlock()
	return r.next.Handle(ctx, cmd)
}

// A frame's work runs on a goroutine that ends with it, not on the connection's reader, which
// would otherwise keep the grown stack for as long as the connection stays open. Frames are
// still handled one at a time, in the order they came.
func TestFramesAreHandledOffTheReadersStack(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	rec := &stackRecorder{next: c.send}
	n := c.node(t, "node-a", nodeOpts{sender: rec})
	cl := dial(t, n, "u1", dialOpts{})
	cl.login(c, 7)
	cl.sub("p2p7_8")
	const pubs = 5
	for i := 1; i <= pubs; i++ {
		cl.write(fmt.Sprintf(`{"pub":{"id":"p%d","topic":"p2p7_8","client_msg_id":"cm-%d","content":"m%d"}}`, i, i, i))
	}
	for i := 1; i <= pubs; i++ {
		if ack := cl.ctrl(fmt.Sprintf("p%d", i)); ack.Code != 202 || ack.Params["seq"] != fmt.Sprint(i) {
			t.Errorf("ack of pub %d = %+v, want seq %d: frames were not handled in order", i, ack, i)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.stacks) != pubs {
		t.Fatalf("%d sends, want %d", len(rec.stacks), pubs)
	}
	for _, st := range rec.stacks {
		if strings.Contains(st, "(*session).readLoop") {
			t.Fatalf("a send ran on the connection's reader goroutine:\n%s", st)
		}
	}
}
