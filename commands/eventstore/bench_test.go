package eventstore_test

import (
	"fmt"
	"testing"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// BenchmarkAppendBatch appends batches of 200 events spread over 5 conversation streams, the
// shape of a busy group-commit window, and reports stored rows per second.
func BenchmarkAppendBatch(b *testing.B) {
	ctx := testCtx(b)
	store, _ := newStore(b, eventstore.Config{})
	acme := domain.MustTenantID("acme")
	const batchSize, streams = 200, 5
	versions := make([]int64, streams)
	batches := make([][]domain.Envelope, 0, b.N)
	for range b.N {
		batch := make([]domain.Envelope, 0, batchSize)
		for i := range batchSize {
			s := i % streams
			versions[s]++
			batch = append(batch, event(acme, fmt.Sprintf("grp_%d", s), versions[s], fmt.Sprintf("msg-%d-%d", s, versions[s])))
		}
		batches = append(batches, batch)
	}
	b.ResetTimer()
	for i := range b.N {
		res, err := store.AppendBatch(ctx, batches[i])
		if err != nil {
			b.Fatal(err)
		}
		if res[len(res)-1].Status != eventstore.Appended {
			b.Fatalf("batch %d: %+v", i, res[len(res)-1])
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "rows/s")
}
