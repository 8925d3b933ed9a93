package ratelimit

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// TestBusySenderWaitsForRedisOnlyOnce: a sender well above one second's share keeps sending on
// its lease while the next one is counted in the background; only its first send waits for a
// round trip, where counting one lease at a time made every tenth wait.
func TestBusySenderWaitsForRedisOnlyOnce(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	l, err := New(rdb, Config{KeyPrefix: prefix, SendPerUser: 600, SendPerTopic: -1}, nil, nil) // leases of 20
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tenant := domain.MustTenantID("acme")
	for i := range 100 {
		if err := l.AllowSend(ctx, tenant, "7", "grp1"); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		time.Sleep(5 * time.Millisecond) // 200 a second, within the minute's burst of 600
	}
	waited := testutil.ToFloat64(l.waited)
	ahead := testutil.ToFloat64(l.ahead)
	if waited > 3 || ahead < 4 {
		t.Fatalf("100 sends: %v waited for Redis, %v leases counted ahead; want at most 3 and at least 4", waited, ahead)
	}
}

// TestLeasesNeverCountFasterThanTheLimit: a node counts at most one lease per lease life, so a
// lease's size over its life must not exceed the limit's rate, or a sender below the limit could be
// refused for requests counted ahead that it never made.
func TestLeasesNeverCountFasterThanTheLimit(t *testing.T) {
	t.Parallel()
	for limit := 1; limit <= domain.MaxRateLimitPerMinute; limit += 1 + limit/50 {
		size := leaseSize(limit)
		ttl := leaseTTL(size, limit)
		if size < 1 || size > maxLease || ttl <= 0 || ttl > leaseWindow && size > 1 {
			t.Fatalf("limit %d/min: lease of %d for %v", limit, size, ttl)
		}
		if perMinute := float64(size) * float64(time.Minute) / float64(ttl); perMinute > float64(limit)*1.0001 {
			t.Fatalf("limit %d/min: a lease of %d every %v counts %.1f a minute", limit, size, ttl, perMinute)
		}
	}
}

// TestLeasesOfASteadySenderCountNoFasterThanTheLimit plays a sender at a steady share of the
// limit through the leases, counting what a node would count in Redis (a lease when a send finds
// none, a refill when take asks for one). A refill counted before its lease ran out used to
// restart the lease's life: at 60% of the limit the node counted 9% more than the limit, so such
// a sender was refused once the minute's burst was used up. Leases sized by the limit rather than
// by the sender counted the whole limit for any sender of one request per lease life or more (300
// sent, 3,000 counted at 5%): a user or a group sending from two nodes at 30% of its limit each
// was counted at twice the limit and refused once the burst was gone. A node must count about
// what its sender sends.
func TestLeasesOfASteadySenderCountNoFasterThanTheLimit(t *testing.T) {
	t.Parallel()
	const limit = 600 // a minute: 10 a second, leases of 20
	for _, share := range []float64{0.05, 0.3, 0.55, 0.6, 0.75, 0.9, 0.99} {
		var (
			ls      leases
			k       = leaseKey{domain.MustTenantID("acme"), domain.RateSendUser, "7"}
			counted int
			size    = leaseSize(limit)
			start   = time.Unix(1_000_000, 0)
			run     = 10 * time.Minute
			every   = time.Duration(float64(time.Minute) / (limit * share))
		)
		for now := start; now.Before(start.Add(run)); now = now.Add(every) {
			switch ok, n := ls.take(k, limit, now); {
			case !ok && n > 0:
				counted += n
				ls.counted(k, n, 1, limit, now)
			case !ok:
				counted++
			case n > 0:
				counted += n
				ls.counted(k, n, 0, limit, now)
			}
		}
		sent := int(run / every)
		if counted > sent+2*size {
			t.Errorf("a sender at %.0f%% of %d a minute sent %d in %v; the node counted %d", share*100, limit, sent, run, counted)
		}
		if most := int(run.Minutes()*limit) + 2*size; counted > most {
			t.Errorf("a sender at %.0f%% of %d a minute: the node counted %d in %v, more than the limit's %d",
				share*100, limit, counted, run, most)
		}
	}
}

// TestACrowdAtAnEmptyLeaseCountsOneLease: sends that arrive together at a key with no lease
// count one lease between them; every other send counts itself. When each counted a lease of
// its own, 50 first sends into a topic limited to 600 a minute (leases of 20) counted 1,000 and
// 20 of them were refused.
func TestACrowdAtAnEmptyLeaseCountsOneLease(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	l, err := New(rdb, Config{KeyPrefix: prefix, SendPerUser: -1, SendPerTopic: 600}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tenant := domain.MustTenantID("acme")
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		refused atomic.Int32
	)
	for u := range 50 {
		wg.Go(func() {
			<-start
			if err := l.AllowSend(ctx, tenant, strconv.Itoa(u+1), "grp1"); err != nil {
				refused.Add(1)
				t.Logf("user %d: %v", u+1, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := refused.Load(); n > 0 {
		t.Fatalf("%d of 50 sends refused by a topic limit of 600 a minute", n)
	}
}
