package policy_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/policy"
	"github.com/imledger/imledger/domain"
)

// BenchmarkCanSend measures warm membership checks: 1,000 members of one group posting in turn,
// answered from the cache (the benchmark fails if a check reads the store), one caller and as
// many parallel callers as GOMAXPROCS.
//
//	go test -run '^$' -bench BenchmarkCanSend ./commands/policy/
func BenchmarkCanSend(b *testing.B) {
	store := newStore(b)
	ctx := testCtx(b)
	tenant := domain.MustTenantID("bench")
	pol := newPolicy(b, policy.Deps{Store: store}, policy.Config{TTL: time.Hour})
	h := newHandlers(b, store, pol)
	res := must[group.Result](b)(h.CreateGroup.Handle(ctx, group.CreateGroup{Actor: who(tenant, 1),
		Profile: must[domain.GroupProfile](b)(domain.NewGroupProfile("g", "", ""))}))
	const members = 1000
	for u := domain.UserID(2); u <= members; u++ {
		must[group.Result](b)(h.JoinGroup.Handle(ctx, group.JoinGroup{Actor: who(tenant, u), Group: res.Group}))
	}
	for u := domain.UserID(1); u <= members; u++ {
		if err := pol.CanSend(ctx, tenant, u, res.Topic); err != nil {
			b.Fatal(err)
		}
	}
	reads := pol.Stats().Reads
	b.Run("sequential", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if err := pol.CanSend(ctx, tenant, domain.UserID(i%members+1), res.Topic); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
	})
	b.Run("parallel", func(b *testing.B) {
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				u := domain.UserID(n.Add(1)%members + 1)
				if err := pol.CanSend(ctx, tenant, u, res.Topic); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
	})
	if n := pol.Stats().Reads - reads; n != 0 {
		b.Fatalf("warm checks read the store %d times", n)
	}
}
