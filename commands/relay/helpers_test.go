package relay_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver for migrations
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/migrations"
)

// env is one test's event store (own database) and Kafka topics (own prefix).
type env struct {
	t       testing.TB
	ctx     context.Context
	pool    *pgxpool.Pool
	store   *eventstore.Store
	kcfg    kafka.Config
	mu      sync.Mutex
	version map[string]int64 // tenant/stream -> last appended version
}

// testCtx ends with the test or after two minutes.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newEnv migrates a fresh database and prepares topics under a fresh prefix on brokers
// (testenv.Kafka when none are given). Topics are created unless createTopics is false.
func newEnv(t testing.TB, brokers []string, createTopics bool) *env {
	t.Helper()
	ctx := testCtx(t)
	url := testenv.Postgres(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrations.UpPostgres(ctx, db); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store, err := eventstore.New(pool, eventstore.Config{MaxRead: 5000, ListenMinBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if brokers == nil {
		brokers = testenv.Kafka(t)
	}
	kcfg := kafka.Config{Brokers: brokers, TopicPrefix: testenv.UniqueName("r") + ".", Partitions: 4}
	if createTopics {
		if err := kafka.EnsureTopics(ctx, kcfg); err != nil {
			t.Fatal(err)
		}
	}
	return &env{t: t, ctx: ctx, pool: pool, store: store, kcfg: kcfg, version: map[string]int64{}}
}

// fastConfig shortens every pause so tests run quickly.
func (e *env) fastConfig() relay.Config {
	return relay.Config{
		Kafka: e.kcfg, MinPoll: 2 * time.Millisecond, MaxPoll: 50 * time.Millisecond,
		LockRetry: 50 * time.Millisecond, LockCheck: 50 * time.Millisecond,
		RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond, StopTimeout: 10 * time.Second,
		PublishTimeout: 2 * time.Second,
	}
}

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// newRelay builds a relay with its own producer; reg may be nil.
func (e *env) newRelay(cfg relay.Config, reg prometheus.Registerer) *relay.Relay {
	e.t.Helper()
	r, err := relay.New(e.store, e.pool, cfg, testLogger(), reg)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// start runs r until the returned stop function (also called at cleanup) cancels it; stop
// waits for Run to return and fails the test if it returned an error or hung.
func start(t testing.TB, ctx context.Context, r *relay.Relay) (stop func()) {
	t.Helper()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("Run did not return 20s after its context was cancelled")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// appendEvents appends n events of type typ to a stream and returns them as stored.
func (e *env) appendEvents(tenant domain.TenantID, streamID string, typ domain.EventType, n int, trace string) []domain.Envelope {
	e.t.Helper()
	out, err := e.tryAppend(e.ctx, tenant, streamID, typ, n, trace)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// tryAppend is appendEvents returning its error, for use off the test goroutine.
func (e *env) tryAppend(ctx context.Context, tenant domain.TenantID, streamID string, typ domain.EventType, n int, trace string) ([]domain.Envelope, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := tenant.String() + "/" + streamID
	from := e.version[k]
	envs := make([]domain.Envelope, n)
	for i := range envs {
		v := from + int64(i) + 1
		env, err := domain.NewEnvelope(tenant, streamID, v, typ, domain.Actor{Type: domain.ActorUser, ID: "7"},
			map[string]any{"seq": fmt.Sprint(v), "text": "hello"})
		if err != nil {
			return nil, err
		}
		env.TraceID = trace
		envs[i] = env
	}
	out, err := e.store.Append(ctx, tenant, streamID, from, envs)
	if err != nil {
		return nil, fmt.Errorf("append %s: %w", k, err)
	}
	e.version[k] = from + int64(n)
	return out, nil
}

// collector reads every topic of the test from the start.
type collector struct {
	t    testing.TB
	cl   *kgo.Client
	recs []*kgo.Record
	seen map[string]bool // event ids
}

func (e *env) collector() *collector {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kcfg.Brokers...), kgo.ConsumeTopics(e.kcfg.Topics()...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(50*time.Millisecond),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cl.Close)
	return &collector{t: e.t, cl: cl, seen: map[string]bool{}}
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// poll reads whatever arrives within d.
func (c *collector) poll(ctx context.Context, d time.Duration) {
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	fs := c.cl.PollFetches(pctx)
	fs.EachRecord(func(r *kgo.Record) {
		c.recs = append(c.recs, r)
		id, _ := header(r, relay.HeaderEventID)
		c.seen[id] = true
	})
}

// waitFor reads until every event of want has arrived, failing the test after timeout.
func (c *collector) waitFor(ctx context.Context, want []domain.Envelope, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		missing := 0
		for _, e := range want {
			if !c.seen[e.EventID.String()] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d of %d events did not arrive on Kafka within %s", missing, len(want), timeout)
		}
		c.poll(ctx, 200*time.Millisecond)
	}
}

// decoded is a record's envelope, parsed from its value.
func decode(t testing.TB, r *kgo.Record) domain.Envelope {
	t.Helper()
	var env domain.Envelope
	if err := json.Unmarshal(r.Value, &env); err != nil {
		t.Fatalf("record value is not an envelope: %v", err)
	}
	return env
}

// checkStreams dedupes the collected records by event id (first copy wins) and checks that each
// stream's versions arrive as 1, 2, 3, … with no gap, no reordering and nothing missing up to
// the last appended version. It returns how many duplicates it dropped.
func (c *collector) checkStreams(e *env) (dups int) {
	c.t.Helper()
	first := map[string]bool{}
	next := map[string]int64{}
	for _, r := range c.recs {
		env := decode(c.t, r)
		if first[env.EventID.String()] {
			dups++
			continue
		}
		first[env.EventID.String()] = true
		k := env.TenantID.String() + "/" + env.StreamID
		if want := next[k] + 1; env.StreamVersion != want {
			c.t.Fatalf("stream %s: got version %d, want %d (order broken or event missing)", k, env.StreamVersion, want)
		}
		next[k] = env.StreamVersion
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, v := range e.version {
		if next[k] != v {
			c.t.Errorf("stream %s: %d versions on Kafka, %d appended", k, next[k], v)
		}
	}
	return dups
}

// waitUntil polls cond every 10ms and fails the test if it is not true within d.
func waitUntil(t testing.TB, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gaugeValue returns the value of the registered single-series gauge called name.
func gaugeValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("gauge %s not registered", name)
	return 0
}

// sumCounter adds up every series of the registered counter called name.
func sumCounter(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// insertRaw inserts env in tx, the way a slow writer's transaction would, and returns its
// position.
func insertRaw(ctx context.Context, t testing.TB, tx pgx.Tx, env domain.Envelope) int64 {
	t.Helper()
	var pos int64
	err := tx.QueryRow(ctx, `INSERT INTO events (event_id, tenant_id, stream_id, stream_version, event_type,
		version, occurred_at, payload, actor_type, actor_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		RETURNING position`,
		env.EventID, env.TenantID.String(), env.StreamID, env.StreamVersion, string(env.EventType),
		env.Version, env.OccurredAt, []byte(env.Payload), env.Actor.Type, env.Actor.ID).Scan(&pos)
	if err != nil {
		t.Fatalf("insert event: %v", err)
	}
	return pos
}

// rawEvent builds an envelope for insertRaw.
func rawEvent(t testing.TB, tenant domain.TenantID, stream string, version int64, typ domain.EventType) domain.Envelope {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	return domain.Envelope{EventID: id, TenantID: tenant, StreamID: stream, StreamVersion: version, EventType: typ,
		Version: 1, OccurredAt: time.Now().UTC(), Actor: domain.Actor{Type: domain.ActorSystem, ID: "test"},
		Payload: []byte(`{"raw":true}`)}
}
