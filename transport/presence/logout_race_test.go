package presence_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/presence"
)

// onPipeline runs fn once, before the first pipeline that names sid reaches Redis.
type onPipeline struct {
	sid   string
	armed atomic.Bool
	fn    func()
}

// seen is the pipeline hook (testenv.PipelineHook).
func (h *onPipeline) seen(_ context.Context, cmds []redis.Cmder) {
	for _, c := range cmds {
		if slices.Contains(c.Args(), any(h.sid)) && h.armed.CompareAndSwap(true, false) {
			h.fn()
			return
		}
	}
}

// TestLogoutDuringARefreshStaysOffline: the node's refresh picks a session, and its client
// disconnects before the refresh reaches Redis. The logout must win: the user is offline and out
// of the topic at once, not online again for a whole TTL because the refresh landed after it.
func TestLogoutDuringARefreshStaysOffline(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr})
	t.Cleanup(func() { _ = rdb.Close() })
	hook := &onPipeline{sid: "racy"}
	rdb.AddHook(testenv.PipelineHook(hook.seen))
	cfg := presence.Config{KeyPrefix: prefix, TTL: 5 * time.Second, TouchInterval: 100 * time.Millisecond}
	a := newStore(t, rdb, cfg, "node-a")
	b := newStore(t, rdb, cfg, "node-b")
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	grp, _ := domain.GroupTopic(9)
	sess := login(t, a, 4, "racy")
	if err := sess.Join(ctx, grp); err != nil {
		t.Fatal(err)
	}

	loggedOut := make(chan error, 1)
	hook.fn = func() {
		// The refresh of "racy" is on its way; the client goes now. Its logout is given a moment
		// to finish first, as it would on a busy node.
		go func() { loggedOut <- sess.Logout(context.WithoutCancel(ctx)) }()
		select {
		case err := <-loggedOut:
			loggedOut <- err
		case <-time.After(300 * time.Millisecond):
		}
	}
	hook.armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for hook.armed.Load() {
		if time.Now().After(deadline) {
			t.Fatal("no refresh of the session within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := <-loggedOut; err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a few more rounds of Run
	if p := get(t, b, 4); p.Online {
		t.Errorf("after the logout the user is %+v, want offline", p)
	}
	if nodes, _ := b.NodesForTopic(testCtx(t), acme, grp); len(nodes) != 0 {
		t.Errorf("nodes of the topic after the logout = %v, want none", nodes)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
}
