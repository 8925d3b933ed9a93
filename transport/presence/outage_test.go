package presence_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/presence"
)

// A login and a join that Redis did not take (paused, its data intact) are written by Run's
// next round once Redis answers, not a TouchInterval later: until then the other nodes neither
// see the user online nor send this node the topic's messages.
func TestRunWritesFailedLoginAndJoinOnceRedisAnswers(t *testing.T) {
	t.Parallel()
	priv := testenv.StartPrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: priv.Addr(), Protocol: 2, MaxRetries: -1, ReadTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	ctl := redis.NewClient(&redis.Options{Addr: priv.Addr(), Protocol: 2})
	t.Cleanup(func() { _ = ctl.Close() })
	cfg := presence.Config{TTL: 30 * time.Second, TouchInterval: 10 * time.Second}
	a, b := newStore(t, rdb, cfg, "node-a"), newStore(t, rdb, cfg, "node-b")
	ctx := testCtx(t)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	time.Sleep(1500 * time.Millisecond) // Run's first round wrote the node's marker
	grp := mustTopic(t, "grp1")

	if err := ctl.Do(ctx, "CLIENT", "PAUSE", 1500, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	s, err := a.Login(ctx, presence.LoginInfo{Tenant: acme, User: 7, SessionID: "s7"})
	if err == nil {
		t.Fatal("Login while Redis is paused succeeded")
	}
	if err := s.Join(ctx, grp); err == nil {
		t.Fatal("Join while Redis is paused succeeded")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		nodes, err := b.NodesForTopic(ctx, acme, grp)
		if err == nil && slices.Equal(nodes, []string{"node-a"}) && get(t, b, 7).Online {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after Redis answered again: nodes of the topic %v (%v), user online %v; want [node-a], online",
				nodes, err, get(t, b, 7).Online)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A FLUSHALL (or a Redis restarted without its data) loses every session of the node; Run
// writes them all again at its next round.
func TestRunRewritesEverySessionAfterRedisLostThem(t *testing.T) {
	t.Parallel()
	priv := testenv.StartPrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: priv.Addr(), Protocol: 2, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	cfg := presence.Config{TTL: 30 * time.Second, TouchInterval: 10 * time.Second}
	a, b := newStore(t, rdb, cfg, "node-a"), newStore(t, rdb, cfg, "node-b")
	ctx := testCtx(t)
	grp := mustTopic(t, "grp1")
	users := []domain.UserID{1, 2, 3}
	for _, u := range users {
		if err := login(t, a, u, "s"+u.String()).Join(ctx, grp); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	time.Sleep(1500 * time.Millisecond)

	for _, lose := range []func(){
		func() { _ = rdb.FlushAll(ctx).Err() },
		priv.Restart,
	} {
		lose()
		deadline := time.Now().Add(5 * time.Second)
		for {
			nodes, _ := b.NodesForTopic(ctx, acme, grp)
			online := 0
			for _, u := range users {
				if get(t, b, u).Online {
					online++
				}
			}
			if slices.Equal(nodes, []string{"node-a"}) && online == len(users) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("5 s after Redis lost them: nodes of the topic %v, %d of %d users online", nodes, online, len(users))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
