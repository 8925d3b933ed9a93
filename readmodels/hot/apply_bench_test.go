package hot_test

import (
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
)

// BenchmarkApplySent applies group sent events one at a time, as the hot projector does, and
// reports events/s.
func BenchmarkApplySent(b *testing.B) {
	ctx, s, _, _ := newStore(b, hot.Config{}, nil)
	events := make([]domain.Envelope, b.N)
	for i := range events {
		events[i] = rmtest.Sent(b, tenant, "grp1", int64(i+1), domain.UserID(1+i%50), "hello, a message of ordinary length for a chat")
	}
	b.ResetTimer()
	start := time.Now()
	for _, e := range events {
		if err := s.Apply(ctx, tenant, e); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkApplyBatchSent applies the same events in pipelined batches of 100 and reports
// events/s.
func BenchmarkApplyBatchSent(b *testing.B) {
	ctx, s, _, _ := newStore(b, hot.Config{}, nil)
	events := make([]domain.Envelope, b.N)
	for i := range events {
		events[i] = rmtest.Sent(b, tenant, "grp1", int64(i+1), domain.UserID(1+i%50), "hello, a message of ordinary length for a chat")
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < len(events); i += 100 {
		if _, err := s.ApplyBatch(ctx, tenant, events[i:min(i+100, len(events))]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}
