package ws_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/imledger/imledger/transport/ratelimit"
)

// TestConnectsPerAddressAreLimited: past rate_limit.ws_connect_per_ip connects a minute from one
// address, the upgrade is refused with 429 and Retry-After; a pub over the sender's send limit
// is answered ctrl 429 rate_limited.
func TestConnectsPerAddressAreLimited(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	l, err := ratelimit.New(c.rdb, ratelimit.Config{KeyPrefix: c.prefix, WSConnectPerIP: 2, SendPerUser: 1}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	n := c.node(t, "node-a", nodeOpts{limiter: l, sender: ratelimit.LimitSends(c.send, l)})
	cl := dial(t, n, "u1", dialOpts{})
	cl.login(c, 1)
	_ = dial(t, n, "u2", dialOpts{})
	ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, n.url(), nil)
	if err == nil {
		_ = conn.CloseNow()
		t.Fatal("the third connect within the minute was upgraded")
	}
	if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third connect: %v %v, want 429", resp, err)
	}
	if s, _ := strconv.Atoi(resp.Header.Get("Retry-After")); s < 1 {
		t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
	}

	first := cl.call("p1", `{"pub":{"id":"p1","topic":"p2p1_2","client_msg_id":"m1","content":{"text":"a"}}}`)
	if first.Code != http.StatusAccepted || first.Params["seq"] != "1" {
		t.Fatalf("first pub: %+v", first)
	}
	over := cl.call("p2", `{"pub":{"id":"p2","topic":"p2p1_2","client_msg_id":"m2","content":{"text":"b"}}}`)
	if over.Code != http.StatusTooManyRequests || over.Reason != "rate_limited" || over.Params["limit"] != "send_user" {
		t.Fatalf("pub over the limit: %+v", over)
	}
}
