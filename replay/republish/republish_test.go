package republish_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/commands/scenariotest"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/replay/republish"
)

var (
	tenantA = domain.MustTenantID("acme")
	tenantB = domain.MustTenantID("globex")
)

type env struct {
	ctx      context.Context
	pool     *pgxpool.Pool
	store    *eventstore.Store
	kcfg     kafka.Config
	producer sarama.SyncProducer
	sc       scenariotest.Env
}

func newEnv(t *testing.T) *env {
	t.Helper()
	pool, store := storetest.EventStore(t, 16)
	rdb, prefix := testenv.Redis(t)
	ctx := testenv.Context(t)
	kcfg := kafka.Config{Brokers: testenv.Kafka(t), TopicPrefix: testenv.UniqueName("rp") + ".", Partitions: 4}
	if err := kafka.EnsureTopics(ctx, kcfg); err != nil {
		t.Fatal(err)
	}
	p, err := kafka.NewSyncProducer(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &env{ctx: ctx, pool: pool, store: store, kcfg: kcfg, producer: p, sc: scenariotest.Env{Store: store, Redis: rdb, KeyPrefix: prefix}}
}

// settle waits until every stored event is below the commit horizon (see export's tests).
func (e *env) settle(t *testing.T) {
	t.Helper()
	var last uint64
	if err := e.pool.QueryRow(e.ctx, `SELECT coalesce(max(tx_id)::text::bigint, 0) FROM events`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		h, err := e.store.Horizon(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h > last {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the commit horizon stayed below transaction %d for 30 s", last)
		}
	}
}

// relayAll publishes the whole store to the live topics with a real relay and stops it.
func (e *env) relayAll(t *testing.T, events int64) {
	t.Helper()
	r, err := relay.New(e.store, e.pool, relay.Config{Name: testenv.UniqueName("relay"), Kafka: e.kcfg,
		MinPoll: 5 * time.Millisecond}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); r.Stats().Events < events; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the relay published %d of %d events in 30 s", r.Stats().Events, events)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// endOffsets returns the end offset of every partition of topics.
func (e *env) endOffsets(t *testing.T, topics ...string) map[string]int64 {
	t.Helper()
	sc, err := kafka.NewSaramaConfig(e.kcfg)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := sarama.NewClient(e.kcfg.Brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[string]int64{}
	for _, topic := range topics {
		parts, err := cl.Partitions(topic)
		if err != nil {
			t.Fatalf("%s: %v", topic, err)
		}
		for _, p := range parts {
			off, err := cl.GetOffset(topic, p, sarama.OffsetNewest)
			if err != nil {
				t.Fatalf("%s/%d: %v", topic, p, err)
			}
			out[topic+"/"+strconv.Itoa(int(p))] = off
		}
	}
	return out
}

// consume reads topic from the start until n records arrived.
func (e *env) consume(t *testing.T, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kcfg.Brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	// Anything more would be a duplicate: give it a moment to show up.
	more, cancel2 := context.WithTimeout(e.ctx, 300*time.Millisecond)
	defer cancel2()
	cl.PollFetches(more).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	return out
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// log returns tenant's events in commit-safe order, as stored.
func (e *env) log(t *testing.T, tenant domain.TenantID) []eventstore.Record {
	t.Helper()
	h, err := e.store.Horizon(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []eventstore.Record
	err = e.store.ScanCommitted(e.ctx, eventstore.Range{Horizon: h}, eventstore.Filter{Tenant: tenant}, 1000,
		func(recs []eventstore.Record) error { out = append(out, recs...); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A consumer of the replay topic gets every event of the tenant once, in each conversation's
// order, as the same record (value, key, headers) the live topics carry, and the live topics do
// not move.
func TestRepublishReplaysATenantWithoutTouchingTheLiveTopics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := scenariotest.Write(e.ctx, t, e.sc, tenantA, 15)
	scenariotest.Write(e.ctx, t, e.sc, tenantB, 4)
	scenariotest.AppendMutedV1(e.ctx, t, e.store, tenantA, res.Group, scenariotest.Member, scenariotest.Owner, time.Time{})
	e.settle(t)
	all := e.log(t, domain.TenantID{})
	e.relayAll(t, int64(len(all)))
	live := e.kcfg.Topics()
	before := e.endOffsets(t, live...)
	liveRecs := map[string]*kgo.Record{}
	for _, r := range e.consume(t, e.kcfg.Topic(kafka.TopicGroupMessagePersist), 0) {
		liveRecs[header(r, relay.HeaderEventID)] = r
	}
	for _, r := range e.consume(t, e.kcfg.Topic(kafka.TopicBusinessEvent), 0) {
		liveRecs[header(r, relay.HeaderEventID)] = r
	}

	target := e.kcfg.Topic(republish.DefaultTopic(tenantA))
	if err := kafka.EnsureTopic(e.ctx, e.kcfg, target); err != nil {
		t.Fatal(err)
	}
	got, err := republish.Run(e.ctx, e.store, e.producer, republish.Config{Topic: target, LiveTopics: e.kcfg.LiveTopics(),
		Tenant: tenantA, BatchSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	want := e.log(t, tenantA)
	if got.Events != int64(len(want)) {
		t.Fatalf("republished %d events, the tenant has %d", got.Events, len(want))
	}
	recs := e.consume(t, target, len(want))
	if len(recs) != len(want) {
		t.Fatalf("the replay topic holds %d records, want %d", len(recs), len(want))
	}
	// Every event once, and each conversation (key) in log order.
	perKey := map[string][]string{}
	seen := map[string]bool{}
	for _, r := range recs {
		id := header(r, relay.HeaderEventID)
		if seen[id] {
			t.Errorf("event %s arrived twice", id)
		}
		seen[id] = true
		perKey[string(r.Key)] = append(perKey[string(r.Key)], id)
		if lr, ok := liveRecs[id]; ok {
			if !bytes.Equal(lr.Value, r.Value) || !bytes.Equal(lr.Key, r.Key) || !sameHeaders(lr, r) {
				t.Errorf("event %s: the replayed record differs from the live one", id)
			}
		}
	}
	wantKey := map[string][]string{}
	for _, w := range want {
		if !seen[w.Envelope.EventID.String()] {
			t.Errorf("event %s (%s) was not republished", w.Envelope.EventID, w.Envelope.EventType)
		}
		k := relay.Key(w.Envelope)
		wantKey[k] = append(wantKey[k], w.Envelope.EventID.String())
	}
	for k, ids := range wantKey {
		if strings.Join(ids, ",") != strings.Join(perKey[k], ",") {
			t.Errorf("conversation %s arrived as %v, want %v", k, perKey[k], ids)
		}
	}
	if len(liveRecs) < 10 {
		t.Fatalf("only %d live records to compare with", len(liveRecs))
	}
	if after := e.endOffsets(t, live...); !sameOffsets(before, after) {
		t.Errorf("live topic offsets moved: before %v, after %v", before, after)
	}
	if got.Cursor.IsZero() {
		t.Error("no cursor to resume from")
	}
	// Refused: a live topic, with or without the prefix.
	for _, bad := range []string{e.kcfg.Topic(kafka.TopicGroupMessagePersist), kafka.TopicBusinessEvent} {
		if _, err := republish.Run(e.ctx, e.store, e.producer, republish.Config{Topic: bad, LiveTopics: e.kcfg.LiveTopics()}); !errors.Is(err, republish.ErrLiveTopic) {
			t.Errorf("republish to %s: %v, want ErrLiveTopic", bad, err)
		}
	}
}

func sameHeaders(a, b *kgo.Record) bool {
	if len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

func sameOffsets(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// failingProducer is the real producer that fails once after `after` batches, as a broker that
// becomes unreachable would.
type failingProducer struct {
	sarama.SyncProducer
	after int32
	calls atomic.Int32
}

var errBrokerGone = errors.New("broker unreachable")

func (f *failingProducer) SendMessages(msgs []*sarama.ProducerMessage) error {
	if f.calls.Add(1) == f.after+1 {
		return errBrokerGone
	}
	return f.SyncProducer.SendMessages(msgs)
}

// A republish that fails resumes from its checkpoint: nothing is lost and, since the failed
// batch was not written, nothing repeats; a rate limit slows it down.
func TestRepublishResumesFromItsCheckpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	scenariotest.Write(e.ctx, t, e.sc, tenantA, 20)
	e.settle(t)
	want := e.log(t, tenantA)
	target := e.kcfg.Topic("im.replay.resume")
	if err := kafka.EnsureTopic(e.ctx, e.kcfg, target); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "replay.cursor")
	cfg := republish.Config{Topic: target, LiveTopics: e.kcfg.LiveTopics(), Tenant: tenantA, BatchSize: 5, Checkpoint: cp}
	fp := &failingProducer{SyncProducer: e.producer, after: 2}
	first, err := republish.Run(e.ctx, e.store, fp, cfg)
	if !errors.Is(err, errBrokerGone) {
		t.Fatalf("first run: %v, want the broker's error", err)
	}
	if first.Events != 10 {
		t.Fatalf("first run sent %d events before failing, want 10", first.Events)
	}
	cfg.Rate = 40
	start := time.Now()
	second, err := republish.Run(e.ctx, e.store, e.producer, cfg)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if first.Events+second.Events != int64(len(want)) {
		t.Fatalf("sent %d + %d events, the tenant has %d", first.Events, second.Events, len(want))
	}
	// At 40 events/s the second run cannot take less than (events - one batch) / 40 seconds.
	if min := time.Duration(float64(second.Events-5) / 40 * float64(time.Second)); took < min {
		t.Errorf("%d events at 40/s took %s, less than %s", second.Events, took, min)
	}
	recs := e.consume(t, target, len(want))
	var ids []string
	for _, r := range recs {
		ids = append(ids, header(r, relay.HeaderEventID))
	}
	var wantIDs []string
	for _, w := range want {
		wantIDs = append(wantIDs, w.Envelope.EventID.String())
	}
	sort.Strings(ids)
	sort.Strings(wantIDs)
	if strings.Join(ids, ",") != strings.Join(wantIDs, ",") {
		t.Errorf("the replay topic holds %d records, want the tenant's %d events once each", len(ids), len(wantIDs))
	}
	// The checkpoint now names the end: a third run sends nothing.
	third, err := republish.Run(e.ctx, e.store, e.producer, republish.Config{Topic: target, Tenant: tenantA, Checkpoint: cp})
	if err != nil || third.Events != 0 {
		t.Errorf("a run after the end sent %d events (%v)", third.Events, err)
	}
}

// RunAsync keeps several batches in flight and still delivers every event once, each
// conversation in log order, and leaves the checkpoint at the end of the log.
func TestRepublishAsyncKeepsOrderWithBatchesInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	scenariotest.Write(e.ctx, t, e.sc, tenantA, 25)
	e.settle(t)
	want := e.log(t, tenantA)
	target := e.kcfg.Topic("im.replay.async")
	if err := kafka.EnsureTopic(e.ctx, e.kcfg, target); err != nil {
		t.Fatal(err)
	}
	sc, err := kafka.NewProducerConfig(e.kcfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sarama.NewAsyncProducer(e.kcfg.Brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	cp := filepath.Join(t.TempDir(), "replay.cursor")
	got, err := republish.RunAsync(e.ctx, e.store, p, republish.Config{Topic: target, LiveTopics: e.kcfg.LiveTopics(),
		Tenant: tenantA, BatchSize: 3, InFlight: 4, Checkpoint: cp})
	if err != nil {
		t.Fatal(err)
	}
	if got.Events != int64(len(want)) {
		t.Fatalf("republished %d events, the tenant has %d", got.Events, len(want))
	}
	recs := e.consume(t, target, len(want))
	perKey := map[string][]string{}
	seen := map[string]bool{}
	for _, r := range recs {
		id := header(r, relay.HeaderEventID)
		if seen[id] {
			t.Errorf("event %s arrived twice", id)
		}
		seen[id] = true
		perKey[string(r.Key)] = append(perKey[string(r.Key)], id)
	}
	wantKey := map[string][]string{}
	for _, w := range want {
		if !seen[w.Envelope.EventID.String()] {
			t.Errorf("event %s was not republished", w.Envelope.EventID)
		}
		k := relay.Key(w.Envelope)
		wantKey[k] = append(wantKey[k], w.Envelope.EventID.String())
	}
	for k, ids := range wantKey {
		if strings.Join(ids, ",") != strings.Join(perKey[k], ",") {
			t.Errorf("conversation %s arrived as %v, want %v", k, perKey[k], ids)
		}
	}
	// A run from the checkpoint sends nothing more.
	again, err := republish.RunAsync(e.ctx, e.store, p, republish.Config{Topic: target, Tenant: tenantA, Checkpoint: cp})
	if err != nil || again.Events != 0 || again.Cursor.Before(got.Cursor) {
		t.Errorf("a run from the checkpoint sent %d events, cursor %s (first run's %s) (%v)", again.Events, again.Cursor, got.Cursor, err)
	}
}

// A checkpoint past the end of the log (edited, or from another database) is refused and left as
// it is, and nothing is sent: a run from it would send nothing and move it on, so that later runs
// skip every event written until the log reached it.
func TestRepublishRefusesACheckpointPastTheLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	scenariotest.Write(e.ctx, t, e.sc, tenantA, 3)
	e.settle(t)
	h, err := e.store.Horizon(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	target := e.kcfg.Topic("im.replay.ahead")
	if err := kafka.EnsureTopic(e.ctx, e.kcfg, target); err != nil {
		t.Fatal(err)
	}
	ahead := eventstore.Cursor{TxID: h + 1_000_000}.String() + "\n"
	cp := filepath.Join(t.TempDir(), "replay.cursor")
	if err := os.WriteFile(cp, []byte(ahead), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := republish.Run(e.ctx, e.store, e.producer, republish.Config{Topic: target, Tenant: tenantA, Checkpoint: cp})
	if !errors.Is(err, domain.ErrInvalid) || res.Events != 0 {
		t.Errorf("a run from checkpoint %q (horizon %d) sent %d events: %v, want an invalid cursor", ahead, h, res.Events, err)
	}
	if raw, err := os.ReadFile(cp); err != nil || string(raw) != ahead {
		t.Errorf("the checkpoint became %q (%v), want %q", raw, err, ahead)
	}
}

// A checkpoint records the tenant and topic of the republish that wrote it: resuming it for
// another tenant or into another topic is refused and sends nothing, since its cursor would skip
// every event of the new selection before it; the same selection resumes.
func TestRepublishRefusesACheckpointOfAnotherSelection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	scenariotest.Write(e.ctx, t, e.sc, tenantB, 4)
	scenariotest.Write(e.ctx, t, e.sc, tenantA, 4)
	e.settle(t)
	target, other := e.kcfg.Topic("im.replay.sel"), e.kcfg.Topic("im.replay.sel2")
	for _, topic := range []string{target, other} {
		if err := kafka.EnsureTopic(e.ctx, e.kcfg, topic); err != nil {
			t.Fatal(err)
		}
	}
	cp := filepath.Join(t.TempDir(), "replay.cursor")
	first, err := republish.Run(e.ctx, e.store, e.producer, republish.Config{Topic: target, Tenant: tenantA, Checkpoint: cp})
	if err != nil || first.Events == 0 {
		t.Fatalf("first run: %d events, %v", first.Events, err)
	}
	saved, err := os.ReadFile(cp)
	if err != nil {
		t.Fatal(err)
	}
	before := e.endOffsets(t, target, other)
	for _, cfg := range []republish.Config{
		{Topic: target, Tenant: tenantB, Checkpoint: cp},
		{Topic: target, Checkpoint: cp},
		{Topic: other, Tenant: tenantA, Checkpoint: cp},
	} {
		res, err := republish.Run(e.ctx, e.store, e.producer, cfg)
		if !errors.Is(err, domain.ErrInvalid) || res.Events != 0 {
			t.Errorf("a run of tenant %q into %s from the checkpoint of tenant %s into %s: %d events, %v; want an invalid checkpoint",
				cfg.Tenant, cfg.Topic, tenantA, target, res.Events, err)
		}
	}
	if raw, err := os.ReadFile(cp); err != nil || string(raw) != string(saved) {
		t.Errorf("the checkpoint became %q (%v), want %q", raw, err, saved)
	}
	if after := e.endOffsets(t, target, other); !equalOffsets(before, after) {
		t.Errorf("the refused runs wrote to Kafka: offsets %v, then %v", before, after)
	}
	again, err := republish.Run(e.ctx, e.store, e.producer, republish.Config{Topic: target, Tenant: tenantA, Checkpoint: cp})
	if err != nil || again.Events != 0 {
		t.Errorf("a run with the checkpoint's own selection: %d events, %v", again.Events, err)
	}
}

func equalOffsets(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
