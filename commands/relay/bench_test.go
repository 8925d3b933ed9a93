package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/domain"
)

// prefill bulk-loads n group-message events into the events table with COPY, perTx rows per
// transaction, spread over 100 conversations of one tenant. It bypasses the store (the table's
// columns are the store's schema) so a benchmark starts from a full table in seconds.
func prefill(ctx context.Context, t testing.TB, e *env, n, perTx int) {
	t.Helper()
	cols := []string{"event_id", "tenant_id", "stream_id", "stream_version", "event_type", "version",
		"trace_id", "source_service", "biz_type", "actor_type", "actor_id", "occurred_at", "payload"}
	const streams = 100
	now := time.Now().UTC()
	for done := 0; done < n; done += perTx {
		rows := make([][]any, 0, perTx)
		for i := done; i < min(done+perTx, n); i++ {
			stream := fmt.Sprintf("grp%d", i%streams)
			seq := int64(i/streams + 1)
			payload, err := json.Marshal(domain.MessageSent{
				MessageID: uuid.NewString(), Topic: stream, GroupID: int64(i % streams), Seq: seq, From: 42,
				ClientMsgID: uuid.NewString(), MsgType: "text", Content: json.RawMessage(`{"text":"hello, this is a benchmark message of typical length"}`),
				SentAt: now,
			})
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, []any{pgtype.UUID{Bytes: uuid.Must(uuid.NewV7()), Valid: true}, "acme", stream, seq,
				string(domain.EventGroupMessageSent), 1, validTraceparent, domain.SourceService, "group_message",
				domain.ActorUser, "42", now, payload})
			e.version["acme/"+stream] = seq
		}
		err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			_, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, cols, pgx.CopyFromRows(rows))
			return err
		})
		if err != nil {
			t.Fatalf("copy events: %v", err)
		}
	}
}

// relayAll runs a fresh relay (a new name, so it starts from the zero checkpoint) until it has
// published n events and returns how long that took.
func relayAll(ctx context.Context, t testing.TB, e *env, cfg relay.Config, n int) time.Duration {
	t.Helper()
	cfg.Name = fmt.Sprintf("bench-%d", relays.Add(1))
	r := e.newRelay(cfg, nil)
	begin := time.Now()
	stop := start(t, ctx, r)
	waitUntil(t, 5*time.Minute, func() bool { return r.Stats().Events >= int64(n) })
	took := time.Since(begin)
	stop()
	if got := r.Stats().Events; got != int64(n) {
		t.Fatalf("relayed %d events, want %d", got, n)
	}
	return took
}

// relays numbers the relays relayAll starts.
var relays atomic.Int64

// The bulk loader matches the store's schema: what it writes is relayed completely and in order.
func TestPrefilledTableIsRelayed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, true)
	const n = 3000
	prefill(e.ctx, t, e, n, 1000)
	took := relayAll(e.ctx, t, e, e.fastConfig(), n)
	c := e.collector()
	deadline := time.Now().Add(20 * time.Second)
	for len(c.seen) < n && time.Now().Before(deadline) {
		c.poll(e.ctx, 200*time.Millisecond)
	}
	if len(c.seen) != n {
		t.Fatalf("%d distinct events on Kafka, want %d", len(c.seen), n)
	}
	c.checkStreams(e)
	t.Logf("relayed %d prefilled events in %s (%.0f events/s)", n, took, n/took.Seconds())
}

// BenchmarkRelay measures relay throughput from a pre-filled events table (100k events, 1000
// per transaction) to the embedded Kafka broker:
//
//	go test -run '^$' -bench BenchmarkRelay -benchtime 1x ./commands/relay/
func BenchmarkRelay(b *testing.B) {
	e := newEnv(b, nil, true)
	const n = 100_000
	begin := time.Now()
	prefill(e.ctx, b, e, n, 1000)
	b.Logf("prefilled %d events in %s", n, time.Since(begin))
	cfg := e.fastConfig()
	cfg.BatchSize = 5000
	b.ResetTimer()
	var total time.Duration
	for range b.N {
		took := relayAll(e.ctx, b, e, cfg, n)
		total += took
		b.Logf("relayed %d events in %s: %.0f events/s", n, took, n/took.Seconds())
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "events/s")
}
