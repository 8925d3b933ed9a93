package ws_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/internal/testenv"
)

// outageCluster is two nodes whose presence and fanout share a private Redis the test may
// restart or flush; u1 on node-a and u2 on node-b are subscribed to grp1.
func outageCluster(t *testing.T) (c *cluster, priv *testenv.PrivateRedis, prdb *redis.Client, a, b *node, u1, u2 *client) {
	t.Helper()
	c = newCluster(t)
	priv = testenv.StartPrivateRedis(t)
	prdb = redis.NewClient(&redis.Options{Addr: priv.Addr(), Protocol: 2, MaxRetries: -1})
	t.Cleanup(func() { _ = prdb.Close() })
	a = c.node(t, "node-a", nodeOpts{rdb: prdb})
	b = c.node(t, "node-b", nodeOpts{rdb: prdb})
	u1 = dial(t, a, "u1@a", dialOpts{})
	u1.login(c, 1)
	u1.sub("grp1")
	u2 = dial(t, b, "u2@b", dialOpts{})
	u2.login(c, 2)
	u2.sub("grp1")
	return
}

// sendUntilDelivered has from send a message every 200 ms until to has received one of them
// (delivery across nodes resumed) or within passes.
func sendUntilDelivered(t *testing.T, from, to *client, within time.Duration) {
	t.Helper()
	start, had := time.Now(), len(to.data())
	for k := 0; ; k++ {
		id := fmt.Sprintf("after%d", k)
		from.write(fmt.Sprintf(`{"pub":{"id":%q,"topic":"grp1","client_msg_id":%q,"content":{"k":%d}}}`, id, id, k))
		if r := from.ctrl(id); r.Code != 202 {
			t.Fatalf("pub %s = %+v", id, r)
		}
		if len(to.data()) > had {
			return
		}
		if time.Since(start) > within {
			t.Fatalf("%s got none of %d messages sent across nodes within %s after Redis came back", to.name, k+1, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestCrossNodeDeliveryResumesAfterRedisFlush: a FLUSHALL of the Redis holding presence
// empties every node's topic members; deliveries across nodes must resume without the clients
// doing anything, long before presence's next regular refresh (presence.ttl/3 and more).
func TestCrossNodeDeliveryResumesAfterRedisFlush(t *testing.T) {
	t.Parallel()
	_, _, prdb, _, _, u1, u2 := outageCluster(t)
	if err := prdb.FlushAll(testCtx(t)).Err(); err != nil {
		t.Fatal(err)
	}
	sendUntilDelivered(t, u1, u2, 10*time.Second)
}

// TestCrossNodeDeliveryResumesAfterRedisRestart is the same for a Redis restart that lost its
// data: the fanout subscriptions and the topic members must come back by themselves.
func TestCrossNodeDeliveryResumesAfterRedisRestart(t *testing.T) {
	t.Parallel()
	_, priv, _, _, _, u1, u2 := outageCluster(t)
	priv.Restart()
	sendUntilDelivered(t, u1, u2, 10*time.Second)
}

// TestPubWhileRedisIsDownIsRetryable: with the Redis of sequencer, presence and fanout down a
// pub is answered 503 retry, retryable, and acked nowhere; once Redis is back (empty) the
// resend is stored with the next seq and reaches the member on the other node.
func TestPubWhileRedisIsDownIsRetryable(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	priv := testenv.StartPrivateRedis(t)
	prdb := redis.NewClient(&redis.Options{Addr: priv.Addr(), Protocol: 2, MaxRetries: -1})
	t.Cleanup(func() { _ = prdb.Close() })
	a := c.node(t, "node-a", nodeOpts{rdb: prdb, sendRedis: prdb})
	b := c.node(t, "node-b", nodeOpts{rdb: prdb, sendRedis: prdb})
	u1 := dial(t, a, "u1@a", dialOpts{})
	u1.login(c, 1)
	u1.sub("grp1")
	u2 := dial(t, b, "u2@b", dialOpts{})
	u2.login(c, 2)
	u2.sub("grp1")
	pub := func(id string) ctrlFrame {
		return u1.call(id, fmt.Sprintf(`{"pub":{"id":%q,"topic":"grp1","client_msg_id":%q,"content":{"t":%q}}}`, id, "m-"+id, id))
	}
	if r := pub("before"); r.Code != 202 || r.Params["seq"] != "1" {
		t.Fatalf("pub before = %+v", r)
	}
	u2.waitFor("the first message", func([]serverFrame) bool { return len(u2.data()) == 1 })

	priv.Stop()
	start := time.Now()
	r := pub("down")
	if r.Code != 503 || r.Reason != "retry" || r.Params["retryable"] != true {
		t.Fatalf("pub with Redis down = %+v, want 503 retry, retryable", r)
	}
	t.Logf("answered in %s", time.Since(start))

	priv.Restart()
	deadline := time.Now().Add(15 * time.Second)
	for k := 0; ; k++ {
		id := fmt.Sprintf("down-%d", k)
		r = u1.call(id, `{"pub":{"id":"`+id+`","topic":"grp1","client_msg_id":"m-down","content":{"t":"down"}}}`)
		if r.Code == 202 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resend after Redis came back = %+v", r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r.Params["seq"] != "2" {
		t.Fatalf("resend after Redis came back = %+v, want seq 2", r)
	}
	// A message committed before the nodes wrote their presence again (within a second of
	// Redis's return) reaches no other node live; later ones do, and get catches up.
	sendUntilDelivered(t, u1, u2, 10*time.Second)
	if r := u2.call("catch-up", `{"get":{"id":"catch-up","topic":"grp1","after_seq":1,"limit":1}}`); r.Code != 200 || r.Params["count"] != float64(1) {
		t.Fatalf("catch-up = %+v", r)
	}
	got := false
	for _, d := range u2.data() {
		got = got || d.Seq == "2" && strings.ReplaceAll(string(d.Content), " ", "") == `{"t":"down"}`
	}
	if !got {
		t.Fatalf("u2 never got seq 2, live or by catch-up: %+v", u2.data())
	}
}

// TestCrossNodeDeliveryResumesAfterRedisPause: Redis stalled (CLIENT PAUSE ALL, data intact)
// past the clients' read timeouts; the fanout subscriptions and presence must carry on afterwards.
func TestCrossNodeDeliveryResumesAfterRedisPause(t *testing.T) {
	t.Parallel()
	_, _, prdb, _, _, u1, u2 := outageCluster(t)
	if err := prdb.Do(testCtx(t), "CLIENT", "PAUSE", 5000, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	sendUntilDelivered(t, u1, u2, 10*time.Second)
}
