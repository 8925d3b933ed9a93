package projections_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/imledger/imledger/cmd/imledger/bench/projectionbench"
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func benchEvents() int {
	if n, err := strconv.Atoi(os.Getenv("IM_BENCH_EVENTS")); err == nil && n > 0 {
		return n
	}
	return 200_000
}

// BenchmarkLive runs projectionbench.BenchLive once against the local MariaDB and an embedded Kafka
// broker: go test -run '^$' -bench Live -benchtime 1x ./projections/
func BenchmarkLive(b *testing.B) {
	h := projtest.NewHarness(b)
	m := projtest.NewMySQL(b)
	tn := m.Tenant("benchlive")
	cfg := h.Config()
	// Topics of the benchmark are created with IM_BENCH_PARTITIONS partitions (default: the
	// internal/kafka default); the live projection's parallelism is one event per partition.
	cfg.Kafka.TopicPrefix = "bench."
	cfg.Kafka.Partitions = int32(envInt("IM_BENCH_PARTITIONS", 0))
	cfg.Batch.Flushers = envInt("IM_BENCH_FLUSHERS", 0)
	// The harness polls the lag every 200ms so that tests see it quickly; measure with the
	// production default.
	cfg.LagInterval = 0
	for i := 0; i < b.N; i++ {
		res, err := projectionbench.BenchLive(benchCtx(b), projectionbench.BenchLiveOptions{Config: cfg, Postgres: h.Pool,
			Store: m.Store, Tenant: tn, Events: benchEvents(), Topics: 100, Out: benchOut(b)})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.PerSecond, "events/s")
	}
}

func benchCtx(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	b.Cleanup(cancel)
	return ctx
}

type benchWriter struct{ b *testing.B }

func (w benchWriter) Write(p []byte) (int, error) { w.b.Log(string(p)); return len(p), nil }

func benchOut(b *testing.B) benchWriter { return benchWriter{b} }

// BenchmarkRebuild runs projectionbench.BenchRebuild once against the local Postgres and MariaDB:
// go test -run '^$' -bench Rebuild -benchtime 1x ./projections/
func BenchmarkRebuild(b *testing.B) {
	h := projtest.NewHarness(b)
	m := projtest.NewMySQL(b)
	tn := m.Tenant("benchrebuild")
	store := projtest.NewEventStore(b, h.Pool)
	for i := 0; i < b.N; i++ {
		res, err := projectionbench.BenchRebuild(benchCtx(b), projectionbench.BenchRebuildOptions{
			Deps:     projectionbench.RebuildDeps{Events: store, Tenants: m.Router, Messages: m.Store},
			Postgres: h.Pool, Tenant: tn, Events: benchEvents(), Topics: 100, Workers: envInt("IM_BENCH_WORKERS", 0),
			BatchSize: envInt("IM_BENCH_BATCH", 0), Out: benchOut(b)})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.PerSecond, "events/s")
	}
}
