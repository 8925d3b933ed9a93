package group_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
)

// BenchmarkJoinGroup measures joins into one group against the real event store: one caller at a
// time, 8 concurrent callers on one node (joins into one group take turns per node), and 8
// concurrent callers spread over two nodes (their joins race on the group stream and retry).
//
//	go test -run '^$' -bench BenchmarkJoinGroup -benchtime 3000x ./commands/group/
func BenchmarkJoinGroup(b *testing.B) {
	for _, bc := range []struct {
		name           string
		callers, nodes int
	}{{"sequential", 1, 1}, {"concurrent8", 8, 1}, {"concurrent8_2nodes", 8, 2}} {
		b.Run(bc.name, func(b *testing.B) {
			pool, store := newStore(b, 16)
			ctx := testCtx(b)
			tenant := domain.MustTenantID("bench")
			cfg := group.Config{MaxMembers: 1 << 30}
			hs := make([]*group.Handlers, bc.nodes)
			for i := range hs {
				hs[i] = newHandlers(b, store, group.Deps{}, cfg)
			}
			g := createGroup(b, hs[0], who(tenant, 1), nil)
			var (
				next    atomic.Int64
				retries atomic.Int64
				wg      sync.WaitGroup
			)
			next.Store(1)
			b.ResetTimer()
			for c := range bc.callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					h := hs[c%bc.nodes]
					for {
						n := next.Add(1)
						if n > int64(b.N)+1 {
							return
						}
						cmd := group.JoinGroup{Actor: who(tenant, domain.UserID(n)), Group: g}
						for {
							_, err := h.JoinGroup.Handle(ctx, cmd)
							if err == nil {
								break
							}
							if !isConcurrency(err) {
								b.Error(err)
								return
							}
							retries.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "joins/s")
			b.ReportMetric(float64(retries.Load()), "exhausted")
			if got := groupState(b, store, tenant, g).MemberCount(); got != b.N+1 {
				b.Fatalf("member count %d, want %d", got, b.N+1)
			}
			var perTx float64
			if err := pool.QueryRow(ctx, `SELECT count(*)::float8 / count(DISTINCT tx_id::text) FROM events
				WHERE tenant_id = $1 AND stream_id = $2 AND event_type = $3`,
				tenant.String(), domain.GroupStreamID(g), string(domain.EventGroupMemberCountChanged)).Scan(&perTx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(perTx, "joins/commit")
		})
	}
}
