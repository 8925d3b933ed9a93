package tenantdb_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// evictingRouter is newRouter with eviction after idle and connections closed after connIdle.
func evictingRouter(t *testing.T, idle, connIdle time.Duration) *tenantdb.Router {
	t.Helper()
	testenv.MySQLServer(t)
	prefix := testenv.UniqueName("imt_ev")
	testenv.DropMySQLDatabasesAtCleanup(t, prefix+"_")
	r, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN, DatabaseTemplate: prefix + "_" + tenantdb.TenantPlaceholder,
		PoolIdleTimeout: idle, ConnMaxIdleTime: connIdle})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestIdlePoolsAreEvicted: a tenant's pool that nobody uses is evicted, then closed; the next DB
// call opens a new one that works. A pool in use is not evicted.
func TestIdlePoolsAreEvicted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := evictingRouter(t, 300*time.Millisecond, 50*time.Millisecond)
	quiet, busy := domain.MustTenantID("quiet"), domain.MustTenantID("busy")
	for _, tn := range []domain.TenantID{quiet, busy} {
		if err := r.Provision(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	first, err := r.DB(ctx, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // keeps busy's pool in use the whole time
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			db, err := r.DB(ctx, busy)
			if err == nil {
				err = db.PingContext(ctx)
			}
			if err != nil {
				t.Errorf("busy tenant: %v", err)
				return
			}
		}
	})
	waitUntil(t, 20*time.Second, "the quiet pool is not evicted", func() bool { return r.Pools().Evicted >= 1 })
	// A caller that took the pool before its eviction can still use it: it is closed only
	// after as long again without use.
	if err := first.PingContext(ctx); err != nil {
		t.Fatalf("the evicted pool, before it is closed: %v", err)
	}
	waitUntil(t, 20*time.Second, "the evicted pool is not closed", func() bool {
		st := r.Pools()
		return st.Evicted >= 1 && st.Open == 1 && st.Retired == 0
	})
	close(stop)
	wg.Wait()
	if err := first.PingContext(ctx); err == nil {
		t.Error("the evicted pool still answers after it was closed")
	}
	again, err := r.DB(ctx, quiet)
	if err != nil || again == first {
		t.Fatalf("DB after eviction: %v (same pool: %v)", err, again == first)
	}
	if err := again.PingContext(ctx); err != nil {
		t.Fatalf("the new pool: %v", err)
	}
	if st := r.Pools(); st.Evicted != 1 {
		t.Errorf("%d pools evicted, want only the quiet one", st.Evicted)
	}
}

// TestEvictionIsSafeUnderConcurrentUse: rounds of goroutines take a tenant's pool and use it at
// once, racing the janitor's sweeps, with quiet gaps between the rounds in which pools are
// evicted and closed: no query ever finds its pool closed. (database/sql closes idle connections
// at most once a second, so a gap lasts a few seconds.)
func TestEvictionIsSafeUnderConcurrentUse(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := evictingRouter(t, 100*time.Millisecond, 20*time.Millisecond)
	tenants := []domain.TenantID{domain.MustTenantID("one"), domain.MustTenantID("two")}
	for _, tn := range tenants {
		if err := r.Provision(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 8*50)
	for round := range 3 {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				tn := tenants[w%2]
				for range 5 {
					time.Sleep(time.Duration(rand.Int64N(int64(20 * time.Millisecond))))
					db, err := r.DB(ctx, tn)
					if err == nil {
						var one int
						err = db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
					}
					if err != nil {
						errs <- fmt.Errorf("round %d, worker %d: %w", round, w, err)
						return
					}
				}
			})
		}
		wg.Wait()
		evicted := r.Pools().Evicted
		waitUntil(t, 20*time.Second, "the quiet pools are not evicted", func() bool { return r.Pools().Evicted >= evicted+2 })
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := r.Pools(); st.Evicted < 6 {
		t.Errorf("pools evicted %d times, want each of 2 after each of 3 rounds", st.Evicted)
	}
}

// TestEvictionOff: a negative PoolIdleTimeout keeps pools until Close.
func TestEvictionOff(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := evictingRouter(t, -1, 10*time.Millisecond)
	tn := domain.MustTenantID("kept")
	if err := r.Provision(ctx, tn); err != nil {
		t.Fatal(err)
	}
	if _, err := r.DB(ctx, tn); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if st := r.Pools(); st.Open != 1 || st.Evicted != 0 {
		t.Fatalf("with eviction off: %+v", st)
	}
}
