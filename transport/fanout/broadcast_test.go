package fanout_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/fanout"
)

// TestBroadcastReachesEveryNodeOnce: an account message reaches the sending node's sessions at
// once and every other node over the broadcast channel, whether or not they have online members
// of any topic, and the sender does not get its own copy back.
func TestBroadcastReachesEveryNodeOnce(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	a, b, c := newNode(t, rdb, prefix, "a"), newNode(t, rdb, prefix, "b"), newNode(t, rdb, prefix, "c")
	m := &fanout.Message{Kind: fanout.KindAccount, Tenant: acme, TS: time.Now().UTC(),
		Account: &fanout.AccountControl{What: "banned", User: 42, Banned: true, Version: 3, EndSessions: true, Reason: "user_banned"}}
	if err := a.fan.Broadcast(testCtx(t), m); err != nil {
		t.Fatal(err)
	}
	if got := a.got.snapshot(); len(got) != 1 || got[0].Account.User != 42 {
		t.Fatalf("sender's own delivery: %+v", got)
	}
	for _, n := range []*node{b, c} {
		deadline := time.Now().Add(5 * time.Second)
		for len(n.got.snapshot()) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		got := n.got.snapshot()
		if len(got) != 1 || got[0].Kind != fanout.KindAccount || got[0].Account.Version != 3 || !got[0].Account.Banned || got[0].Origin != "a" {
			t.Fatalf("node %s got %+v", n.id, got)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if got := a.got.snapshot(); len(got) != 1 {
		t.Fatalf("the sender got its broadcast back: %d deliveries", len(got))
	}
	// A process without a Fanout (an operator command) reaches every node.
	m2 := &fanout.Message{Kind: fanout.KindAccount, Tenant: acme, Account: &fanout.AccountControl{What: "tenant_changed", Status: "suspended"}}
	if err := fanout.PublishBroadcast(testCtx(t), rdb, prefix, m2); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(a.got.snapshot()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := a.got.snapshot(); len(got) != 2 || got[1].Account.Status != "suspended" {
		t.Fatalf("operator broadcast: %+v", got)
	}
	if err := fanout.PublishBroadcast(testCtx(t), rdb, prefix, &fanout.Message{Kind: fanout.KindData, Tenant: acme}); err == nil {
		t.Fatal("a data message was broadcast")
	}
}

// publishCounter counts the PUBLISH commands a client sends alone and the pipelines of them.
type publishCounter struct {
	alone, pipelines, pipelined atomic.Int64
}

func (c *publishCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *publishCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "publish" {
			c.alone.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *publishCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		publishes := 0
		for _, cmd := range cmds {
			if cmd.Name() == "publish" {
				publishes++
			}
		}
		if publishes > 0 {
			c.pipelines.Add(1)
			c.pipelined.Add(int64(publishes))
		}
		return next(ctx, cmds)
	}
}

// TestConcurrentBroadcastsShareRoundTrips: broadcasts made while one is on its way to Redis go
// in one pipeline, and every one of them reaches the other node.
func TestConcurrentBroadcastsShareRoundTrips(t *testing.T) {
	t.Parallel()
	shared, prefix := testenv.Redis(t)
	rdb := redis.NewClient(shared.Options())
	t.Cleanup(func() { _ = rdb.Close() })
	counter := &publishCounter{}
	rdb.AddHook(counter)
	a, b := newNode(t, rdb, prefix, "a"), newNode(t, shared, prefix, "b")
	const n = 300
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := &fanout.Message{Kind: fanout.KindAccount, Tenant: acme, TS: time.Now().UTC(),
				Account: &fanout.AccountControl{What: "kicked", User: domain.UserID(i + 1), EndSessions: true}}
			if err := a.fan.Broadcast(testCtx(t), m); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	waitFor(t, "every broadcast on node b", func() bool { return len(b.got.snapshot()) >= n })
	users := map[domain.UserID]bool{}
	for _, m := range b.got.snapshot() {
		users[m.Account.User] = true
	}
	if len(users) != n {
		t.Fatalf("node b got %d distinct broadcasts, want %d", len(users), n)
	}
	alone, pipelines, pipelined := counter.alone.Load(), counter.pipelines.Load(), counter.pipelined.Load()
	if alone+pipelined != n || pipelines == 0 || alone+pipelines >= n/2 {
		t.Fatalf("%d broadcasts took %d round trips (%d alone, %d pipelines of %d), want them to share", n, alone+pipelines, alone, pipelines, pipelined)
	}
	t.Logf("%d broadcasts: %d alone, %d pipelines of %d", n, alone, pipelines, pipelined)
}
