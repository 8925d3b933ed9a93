package business_test

import (
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/business"
)

// BenchmarkApplyJoins applies batches of 100 joins (200 events: membership plus member count),
// each batch into a new group so no group fills up.
func BenchmarkApplyJoins(b *testing.B) {
	ctx, f := setup(b)
	gid := domain.GroupID(1)
	events := 0
	for b.Loop() {
		b.StopTimer()
		gid++
		f.apply(ctx, b, f.w.create(gid, 1, "bench")...)
		var batch []domain.Envelope
		for u := domain.UserID(2); u < 102; u++ {
			batch = append(batch, f.w.join(gid, u)...)
		}
		b.StartTimer()
		f.apply(ctx, b, batch...)
		events += len(batch)
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

func benchIsMember(b *testing.B, cached bool) {
	ctx, f := setup(b)
	f.apply(ctx, b, concat(f.w.create(7, 1, "bench"), f.w.join(7, 2, 3, 4, 5, 6, 7, 8, 9, 10))...)
	s := f.store
	if !cached {
		s = f.mysqlOnly(b)
	}
	var st *business.Store = s
	for b.Loop() {
		if ok, err := st.IsMember(ctx, f.tenant, 7, 5); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkIsMemberCached answers from the Redis member set.
func BenchmarkIsMemberCached(b *testing.B) { benchIsMember(b, true) }

// BenchmarkIsMemberMySQL answers from MySQL, as while Redis is down.
func BenchmarkIsMemberMySQL(b *testing.B) { benchIsMember(b, false) }
