package ws_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/transport/ws"
)

// TestStuckClientIsDisconnectedWithoutDelayingOthers subscribes 50 reading clients and one
// client that never reads its socket (with a tiny receive buffer) to one group, then sends a
// steady stream of 4 KiB messages. The stuck client's queue fills and it is disconnected; the
// 50 others get every message, and the time from send to delivery stays small for them.
func TestStuckClientIsDisconnectedWithoutDelayingOthers(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	// A long write timeout: the stuck client must be cut off by its full queue, not by a deadline.
	// The readers only read, so a long idle timeout keeps them through a slow (race) run.
	n := c.node(t, "node-a", nodeOpts{cfg: ws.Config{SendQueueSize: 64, HistoryMaxLimit: 50, WriteTimeout: time.Minute,
		IdleTimeout: 10 * time.Minute, SocketSendBuffer: 16 << 10}})
	const readers, messages, interval = 50, 300, 10 * time.Millisecond

	stuck := dial(t, n, "stuck", dialOpts{noRead: true, readBuf: 4096})
	stuck.write(map[string]any{"login": map[string]any{"id": "l", "token": c.token(t, 999)}})
	stuck.write(map[string]any{"sub": map[string]any{"id": "s", "topic": "grp9"}})
	fast := make([]*client, readers)
	var wg sync.WaitGroup
	for i := range fast {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fast[i] = dial(t, n, fmt.Sprintf("reader-%d", i), dialOpts{})
			fast[i].login(c, 1000+userID(i))
			fast[i].sub("grp9")
		}()
	}
	wg.Wait()
	waitUntil(t, "all subscribed", func() bool { return n.gw.Hub().Subscribers(acme, mustTopic(t, "grp9")) == readers+1 })

	sender := dial(t, n, "sender", dialOpts{})
	sender.login(c, 1)
	pad := strings.Repeat("x", 4096)
	start := time.Now()
	cutOff := make(chan time.Duration, 1)
	go func() {
		for time.Since(start) < 30*time.Second {
			if n.counter(t, "imledger_ws_disconnects_total", map[string]string{"cause": "slow_consumer"}) > 0 {
				cutOff <- time.Since(start)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(cutOff)
	}()
	for k := range messages {
		content, _ := json.Marshal(map[string]any{"sent_ns": time.Now().UnixNano(), "pad": pad})
		sender.write(fmt.Sprintf(`{"pub":{"id":"p%d","topic":"grp9","client_msg_id":"m%d","content":%s}}`, k, k, content))
		time.Sleep(time.Until(start.Add(time.Duration(k+1) * interval)))
	}
	for k := range messages {
		if r := sender.ctrl(fmt.Sprintf("p%d", k)); r.Code != 202 {
			t.Fatalf("ack p%d = %+v", k, r)
		}
	}

	delays, fromCommit := deliveryDelays(t, fast, messages)
	if after, ok := <-cutOff; ok {
		t.Logf("stuck client disconnected %s after the first send (~%d messages)", after.Round(time.Millisecond), int(after/interval))
	}
	if v := n.counter(t, "imledger_ws_disconnects_total", map[string]string{"cause": "slow_consumer"}); v != 1 {
		t.Errorf("disconnects{slow_consumer} = %v, want 1 (the stuck client)", v)
	}
	if got := n.gw.Hub().Subscribers(acme, mustTopic(t, "grp9")); got != readers {
		t.Errorf("grp9 has %d local subscribers, want %d once the stuck client is gone", got, readers)
	}
	// send->deliver includes the sender's own queue of pubs waiting for their commit; the stuck
	// client can only show up after the commit, so that is what the bound applies to.
	sendP := quantiles(delays)
	commitP := quantiles(fromCommit)
	t.Logf("%d deliveries to %d readers at %.0f msg/s of 4 KiB: send->deliver p50 %s p99 %s max %s; commit->deliver p50 %s p99 %s max %s",
		len(delays), readers, float64(time.Second)/float64(interval), sendP(0.5), sendP(0.99), sendP(1), commitP(0.5), commitP(0.99), commitP(1))
	if commitP(0.99) > timingFactor*500*time.Millisecond {
		t.Errorf("p99 commit->deliver %s: the stuck client held the others up", commitP(0.99))
	}
}

// deliveryDelays checks that every client got each of the messages once and returns the
// send->deliver delays (from the time inside the content) and commit->deliver delays (from ts).
func deliveryDelays(t *testing.T, clients []*client, messages int) (fromSend, fromCommit []time.Duration) {
	t.Helper()
	for _, cl := range clients {
		fs := cl.waitFor("every message", func(fs []serverFrame) bool { return countData(fs) >= messages })
		seen := map[string]bool{}
		for _, f := range fs {
			if f.Data == nil {
				continue
			}
			if seen[f.Data.Seq] {
				t.Fatalf("%s got seq %s twice", cl.name, f.Data.Seq)
			}
			seen[f.Data.Seq] = true
			var body struct {
				SentNS int64 `json:"sent_ns"`
			}
			if err := json.Unmarshal(f.Data.Content, &body); err != nil {
				t.Fatal(err)
			}
			fromSend = append(fromSend, f.at.Sub(time.Unix(0, body.SentNS)))
			committed, err := time.Parse(time.RFC3339Nano, f.Data.TS)
			if err != nil {
				t.Fatal(err)
			}
			fromCommit = append(fromCommit, f.at.Sub(committed))
		}
		if len(seen) != messages {
			t.Fatalf("%s got %d distinct messages, want %d", cl.name, len(seen), messages)
		}
	}
	return fromSend, fromCommit
}

// quantiles sorts d and returns its quantile function.
func quantiles(d []time.Duration) func(q float64) time.Duration {
	slices.Sort(d)
	return func(q float64) time.Duration { return d[int(q*float64(len(d)-1))] }
}

func countData(fs []serverFrame) int {
	n := 0
	for _, f := range fs {
		if f.Data != nil {
			n++
		}
	}
	return n
}
