package ratelimit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/ratelimit"
)

type settings map[domain.TenantID]domain.RateLimits

func (s settings) RateLimits(_ context.Context, t domain.TenantID) domain.RateLimits { return s[t] }

func newLimiter(t *testing.T, rdb redis.UniversalClient, prefix string, s ratelimit.Settings) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(rdb, ratelimit.Config{KeyPrefix: prefix, SendPerUser: 5, SendPerTopic: 1000, GroupCreatePerUser: 2}, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func limitedBy(err error, kind domain.RateLimitKind) bool {
	var rl *domain.RateLimitedError
	return errors.As(err, &rl) && rl.Limit == kind && rl.RetryAfter > 0
}

func TestSendLimitsPerUserAndTenantOverrides(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	acme, demo := domain.MustTenantID("acme"), domain.MustTenantID("demo")
	l := newLimiter(t, rdb, prefix, settings{acme: {domain.RateSendUser: 2, domain.RateSendTopic: 0}})

	// 20 concurrent sends of one demo user: exactly the node's 5 pass.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
	)
	for range 20 {
		wg.Go(func() {
			err := l.AllowSend(ctx, demo, "7", "grp1")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				allowed++
			case !limitedBy(err, domain.RateSendUser):
				t.Errorf("unexpected %v", err)
			}
		})
	}
	wg.Wait()
	if allowed != 5 {
		t.Fatalf("%d of 20 sends passed a limit of 5", allowed)
	}
	// The tenant's setting applies to its users; another user has a counter of its own.
	for i, want := range []bool{true, true, false} {
		if err := l.AllowSend(ctx, acme, "7", "grp1"); (err == nil) != want {
			t.Fatalf("acme send %d: %v, want allowed=%t", i, err, want)
		}
	}
	if err := l.AllowSend(ctx, acme, "8", "grp1"); err != nil {
		t.Fatalf("another user: %v", err)
	}
	// Request limits on redis_rate.
	for i, want := range []bool{true, true, false} {
		err := l.Allow(ctx, demo, domain.RateGroupCreateUser, "7")
		if (err == nil) != want || (!want && !limitedBy(err, domain.RateGroupCreateUser)) {
			t.Fatalf("group creation %d: %v, want allowed=%t", i, err, want)
		}
	}
}

func TestTopicLimit(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	l, err := ratelimit.New(rdb, ratelimit.Config{KeyPrefix: prefix, SendPerUser: 1000, SendPerTopic: 3}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tenant := domain.MustTenantID("acme")
	for i := range 3 {
		if err := l.AllowSend(ctx, tenant, string(rune('a'+i)), "grp9"); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := l.AllowSend(ctx, tenant, "z", "grp9"); !limitedBy(err, domain.RateSendTopic) {
		t.Fatalf("4th send to the topic: %v, want send_topic", err)
	}
	if err := l.AllowSend(ctx, tenant, "z", "grp10"); err != nil {
		t.Fatalf("another topic: %v", err)
	}
}

func TestRedisDownFailsClosed(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	private := testenv.StartPrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: private.Addr(), MaxRetries: -1, DialTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	l := newLimiter(t, rdb, "im:", nil)
	tenant := domain.MustTenantID("acme")
	if err := l.AllowSend(ctx, tenant, "1", "grp1"); err != nil {
		t.Fatal(err)
	}
	private.Stop()
	if err := l.AllowSend(ctx, tenant, "1", "grp1"); !errors.Is(err, domain.ErrRetryable) {
		t.Fatalf("send with Redis down: %v, want retryable", err)
	}
	if err := l.Allow(ctx, tenant, domain.RateRESTUser, "1"); !errors.Is(err, domain.ErrRetryable) {
		t.Fatalf("request with Redis down: %v, want retryable", err)
	}
}

// TestLimitsSurviveAFlushedScriptCache: after SCRIPT FLUSH (or a restart) the limiter's scripts
// are sent again in full, and the limits keep counting from where they were.
func TestLimitsSurviveAFlushedScriptCache(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	private := testenv.StartPrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: private.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	l := newLimiter(t, rdb, "im:", nil)
	tenant := domain.MustTenantID("acme")
	for i := range 3 {
		if err := l.AllowSend(ctx, tenant, "1", "grp1"); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 5; i++ {
		if err := l.AllowSend(ctx, tenant, "1", "grp1"); err != nil {
			t.Fatalf("send %d after SCRIPT FLUSH: %v", i, err)
		}
	}
	if err := l.AllowSend(ctx, tenant, "1", "grp1"); !limitedBy(err, domain.RateSendUser) {
		t.Fatalf("6th send within the minute: %v, want send_user", err)
	}
}
