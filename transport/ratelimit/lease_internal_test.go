package ratelimit

import (
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
	l, err := New(rdb, Config{KeyPrefix: prefix, SendPerUser: 600, SendPerTopic: -1}, nil, nil) // leases of 10
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
	if waited > 3 || ahead < 8 {
		t.Fatalf("100 sends: %v waited for Redis, %v leases counted ahead; want at most 3 and at least 8", waited, ahead)
	}
}
