package policy_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/policy"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// testCtx returns a context that ends with the test or after two minutes.
func testCtx(t testing.TB) context.Context { return testenv.Context(t) }

// newStore migrates a fresh database and returns an event store over it.
func newStore(t testing.TB) *eventstore.Store {
	t.Helper()
	_, store := storetest.EventStore(t, 12)
	return store
}

func newPolicy(t testing.TB, deps policy.Deps, cfg policy.Config) *policy.Policy {
	t.Helper()
	p, err := policy.New(deps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newHandlers(t testing.TB, store *eventstore.Store, inval group.Invalidator) *group.Handlers {
	t.Helper()
	h, err := group.New(group.Deps{Store: store, Invalidator: inval}, group.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func who(tenant domain.TenantID, u domain.UserID) domain.Principal {
	return domain.Principal{Tenant: tenant, User: u}
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func reasonOf(err error) string {
	var d *domain.DeniedError
	if errors.As(err, &d) {
		return d.Reason
	}
	return ""
}

func groupTopic(t testing.TB, g domain.GroupID) domain.Topic {
	t.Helper()
	topic, err := g.Topic()
	if err != nil {
		t.Fatal(err)
	}
	return topic
}

// bus is an in-process stand-in for the invalidation channel transport provides (Kafka
// im.cache.invalidate or Redis Pub/Sub): Publish queues each key to every subscriber, which
// receives it asynchronously, as a real channel delivers.
type bus struct {
	mu   sync.Mutex
	subs []chan policy.Key
}

func (b *bus) Publish(_ context.Context, keys []policy.Key) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.subs {
		for _, k := range keys {
			// The wire form, as a real channel would carry it.
			parsed, err := policy.ParseKey(k.String())
			if err != nil {
				return err
			}
			s <- parsed
		}
	}
	return nil
}

func (b *bus) Subscribe(ctx context.Context, fn func(policy.Key)) error {
	ch := make(chan policy.Key, 1024)
	b.mu.Lock()
	b.subs = append(b.subs, ch)
	b.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case k := <-ch:
			fn(k)
		}
	}
}

// subscribers returns how many subscriptions are established.
func (b *bus) subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// eventually polls cond every 5 ms until it holds or d passes, and returns the time it took.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}
