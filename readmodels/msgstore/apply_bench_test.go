package msgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// BenchmarkApply applies batches of 100 sent events (one group topic, consecutive seqs), the
// shape a live projector sees under load, and reports rows/s.
func BenchmarkApply(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := rmtest.Router(b)
	tenant := rmtest.Tenant(b, r)
	store := msgstore.NewStore(r)
	const batch = 100
	// Build the events before timing: envelope construction is the write side's cost.
	batches := make([][]domain.Envelope, b.N)
	seq := int64(0)
	for i := range batches {
		batches[i] = make([]domain.Envelope, batch)
		for j := range batches[i] {
			seq++
			batches[i][j] = rmtest.Sent(b, tenant, "grp1", seq, domain.UserID(1+seq%50), "hello, a message of ordinary length for a chat")
		}
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := store.Apply(ctx, tenant, "bench", msgstore.DefaultTables(), batches[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "rows/s")
}
