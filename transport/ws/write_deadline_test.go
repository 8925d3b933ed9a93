package ws_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/transport/ws"
)

// TestStuckClientIsCutByTheWriteTimeout subscribes a client that never reads (with tiny socket
// buffers) and one that does to a group, then sends 4 KiB messages far slower than the send
// queue could fill. The stuck client's writes block once the socket buffers are full; the write
// timeout, not the queue, must disconnect it, while the reader gets every message.
func TestStuckClientIsCutByTheWriteTimeout(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	const writeTimeout = time.Second
	n := c.node(t, "node-a", nodeOpts{cfg: ws.Config{SendQueueSize: 512, WriteTimeout: writeTimeout, SocketSendBuffer: 8 << 10}})
	stuck := dial(t, n, "stuck", dialOpts{noRead: true, readBuf: 4096})
	stuck.write(map[string]any{"login": map[string]any{"id": "l", "token": c.token(t, 999)}})
	stuck.write(map[string]any{"sub": map[string]any{"id": "s", "topic": "grp7"}})
	reader := dial(t, n, "reader", dialOpts{})
	reader.login(c, 1000)
	reader.sub("grp7")
	waitUntil(t, "both subscribed", func() bool { return n.gw.Hub().Subscribers(acme, mustTopic(t, "grp7")) == 2 })

	sender := dial(t, n, "sender", dialOpts{})
	sender.login(c, 1)
	pad := strings.Repeat("y", 4096)
	const messages, interval = 100, 50 * time.Millisecond
	var cutAfter time.Duration
	start := time.Now()
	for k := range messages {
		content, _ := json.Marshal(map[string]any{"k": k, "pad": pad})
		sender.write(fmt.Sprintf(`{"pub":{"id":"p%d","topic":"grp7","client_msg_id":"w%d","content":%s}}`, k, k, content))
		time.Sleep(time.Until(start.Add(time.Duration(k+1) * interval)))
		if cutAfter == 0 && n.counter(t, "imledger_ws_disconnects_total", map[string]string{"cause": "write_failed"}) > 0 {
			cutAfter = time.Since(start)
		}
	}
	t.Logf("stuck client cut %s after the first send", cutAfter.Round(time.Millisecond))
	// 100 messages of 4 KiB fill the stuck client's buffers within about 10 of them (0.5 s);
	// its writer then blocks until the deadline: gone well before the sending ends at 5 s.
	if cutAfter == 0 || cutAfter > timingFactor*(5*writeTimeout/2+time.Second) {
		t.Errorf("stuck client cut after %s (0: never), want within about the write timeout of its buffers filling", cutAfter)
	}
	if v := n.counter(t, "imledger_ws_disconnects_total", map[string]string{"cause": "slow_consumer"}); v != 0 {
		t.Errorf("disconnects{slow_consumer} = %v: the queue of 512 frames filled instead", v)
	}
	// Each pub waits for its commit before the sender's next is handled: slow under the race
	// detector on a busy machine.
	reader.waitWithin(timingFactor*15*time.Second, "every message", func(fs []serverFrame) bool { return countData(fs) >= messages })
	if got := n.gw.Hub().Subscribers(acme, mustTopic(t, "grp7")); got != 1 {
		t.Errorf("grp7 has %d local subscribers, want only the reader", got)
	}
}
