package projections_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/projections"
)

// harness is one isolated test environment: an embedded Kafka broker with prefixed topics, a
// fresh Postgres database with the parking schema, and a producer.
type harness struct {
	t        testing.TB
	kcfg     tkafka.Config
	pool     *pgxpool.Pool
	pgURL    string
	producer sarama.SyncProducer
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	ctx := testCtx(t)
	kcfg := tkafka.Config{Brokers: testenv.Kafka(t), TopicPrefix: testenv.UniqueName("t") + ".", Partitions: 6}
	if err := tkafka.EnsureTopics(ctx, kcfg); err != nil {
		t.Fatal(err)
	}
	pgURL := testenv.Postgres(t)
	pool, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := projections.EnsureSchema(ctx, pool); err != nil {
		t.Fatal(err)
	}
	producer, err := tkafka.NewSyncProducer(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = producer.Close() })
	return &harness{t: t, kcfg: kcfg, pool: pool, pgURL: pgURL, producer: producer}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("IM_TEST_VERBOSE") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// record is a Kafka record as the relay publishes it.
func record(topic string, env domain.Envelope) *sarama.ProducerMessage {
	value, err := json.Marshal(env)
	if err != nil {
		panic(err)
	}
	h := func(k, v string) sarama.RecordHeader { return sarama.RecordHeader{Key: []byte(k), Value: []byte(v)} }
	return &sarama.ProducerMessage{
		Topic: topic,
		Key:   sarama.StringEncoder(env.TenantID.String() + ":" + domain.ConversationKey(env.StreamID)),
		Value: sarama.ByteEncoder(value),
		Headers: []sarama.RecordHeader{h("event_id", env.EventID.String()), h("event_type", string(env.EventType)),
			h("tenant_id", env.TenantID.String()), h("stream_version", strconv.FormatInt(env.StreamVersion, 10)),
			h("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
	}
}

// publish sends envs to the topic of their category, in order.
func (h *harness) publish(envs ...domain.Envelope) {
	h.t.Helper()
	msgs := make([]*sarama.ProducerMessage, 0, len(envs))
	for _, e := range envs {
		info, ok := domain.LookupEventType(e.EventType)
		if !ok {
			h.t.Fatalf("unknown event type %s", e.EventType)
		}
		topic, _ := h.kcfg.CategoryTopic(string(info.Category))
		msgs = append(msgs, record(topic, e))
	}
	for start := 0; start < len(msgs); start += 5000 {
		if err := h.producer.SendMessages(msgs[start:min(start+5000, len(msgs))]); err != nil {
			h.t.Fatal(err)
		}
	}
}

// config is a projector configuration with short retries for tests.
func (h *harness) config() projections.Config {
	return projections.Config{
		Kafka:           h.kcfg,
		Retry:           projections.RetryConfig{MaxRetries: 2, InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond},
		NackResendSleep: 50 * time.Millisecond,
		LagInterval:     200 * time.Millisecond,
		CloseTimeout:    5 * time.Second,
	}
}

// run starts a projector until the test ends and returns it with its metrics registry.
func (h *harness) run(cfg projections.Config, projs ...projections.Projection) (*projections.Projector, *prometheus.Registry) {
	h.t.Helper()
	reg := prometheus.NewRegistry()
	p, err := projections.NewProjector(cfg, projections.Deps{Postgres: h.pool, Logger: testLogger(), Registerer: reg}, projs...)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				h.t.Errorf("projector: %v", err)
			}
		case <-time.After(20 * time.Second):
			h.t.Errorf("projector did not stop")
		}
	})
	return p, reg
}

// eventually calls f until it returns nil or timeout passes, then fails with f's last error.
func eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// deadLetterRecords reads every record of the dead-letter topic.
func (h *harness) deadLetterRecords(want int) []*kgo.Record {
	h.t.Helper()
	c, err := kgo.NewClient(kgo.SeedBrokers(h.kcfg.Brokers...), kgo.ConsumeTopics(h.kcfg.Topic(tkafka.TopicDeadLetter)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		h.t.Fatal(err)
	}
	defer c.Close()
	var out []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(out) < want && ctx.Err() == nil {
		f := c.PollFetches(ctx)
		f.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func headers(r *kgo.Record) map[string]string {
	m := map[string]string{}
	for _, h := range r.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}

// Event builders.

var actor = domain.Actor{Type: domain.ActorUser, ID: "1"}

func groupTopic(id int64) domain.Topic {
	t, err := domain.GroupTopic(id)
	if err != nil {
		panic(err)
	}
	return t
}

func sentEvent(tenant domain.TenantID, topic domain.Topic, seq int64, from domain.UserID, text string) domain.Envelope {
	p := domain.MessageSent{MessageID: fmt.Sprintf("m-%s-%d", topic, seq), Topic: topic.String(), Seq: seq, From: from,
		ClientMsgID: fmt.Sprintf("c%d-%d", from, seq), MsgType: domain.MsgText, Content: mustJSON(text), SentAt: time.Now().UTC()}
	if topic.Kind() == domain.TopicGroup {
		p.GroupID = topic.GroupID()
	}
	return mustEnvelope(tenant, topic.String(), seq, domain.SentEventType(topic.Kind()), p)
}

func recallEvent(tenant domain.TenantID, topic domain.Topic, seq int64, by domain.UserID, opVersion int64) domain.Envelope {
	return mustEnvelope(tenant, domain.MessageOpsStreamID(topic, seq), opVersion, domain.MessageEventType(topic.Kind(), domain.ActionRecalled),
		domain.MessageRecalled{Topic: topic.String(), Seq: seq, MessageID: fmt.Sprintf("m-%s-%d", topic, seq), By: by, RecalledAt: time.Now().UTC()})
}

func editEvent(tenant domain.TenantID, topic domain.Topic, seq int64, by domain.UserID, editVersion int64, text string) domain.Envelope {
	return mustEnvelope(tenant, domain.MessageOpsStreamID(topic, seq), editVersion-1, domain.MessageEventType(topic.Kind(), domain.ActionEdited),
		domain.MessageEdited{Topic: topic.String(), Seq: seq, MessageID: fmt.Sprintf("m-%s-%d", topic, seq), By: by,
			EditVersion: editVersion, Content: mustJSON(text), EditedAt: time.Now().UTC()})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func mustEnvelope(tenant domain.TenantID, stream string, version int64, typ domain.EventType, payload any) domain.Envelope {
	e, err := domain.NewEnvelope(tenant, stream, version, typ, actor, payload)
	if err != nil {
		panic(err)
	}
	return e
}

// recorder is an in-memory Applier for tests of the framework: it keeps each event once, in
// the order applied, per conversation.
type recorder struct {
	mu    sync.Mutex
	seen  map[string]bool
	convs map[string][]domain.Envelope
	calls int
}

func newRecorder() *recorder {
	return &recorder{seen: map[string]bool{}, convs: map[string][]domain.Envelope{}}
}

func (r *recorder) Apply(_ context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	n := 0
	for _, e := range events {
		if e.TenantID != tenant {
			return 0, fmt.Errorf("event of %s applied as %s", e.TenantID, tenant)
		}
		if r.seen[e.EventID.String()] {
			continue
		}
		r.seen[e.EventID.String()] = true
		k := e.TenantID.String() + ":" + domain.ConversationKey(e.StreamID)
		r.convs[k] = append(r.convs[k], e)
		n++
	}
	return n, nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// conv returns the event ids applied for a conversation, in order.
func (r *recorder) conv(tenant domain.TenantID, conv string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.convs[tenant.String()+":"+conv] {
		out = append(out, e.EventID.String())
	}
	return out
}

func ids(envs ...domain.Envelope) []string {
	out := make([]string, len(envs))
	for i, e := range envs {
		out[i] = e.EventID.String()
	}
	return out
}

type stringEncoder string

func (s stringEncoder) Encode() ([]byte, error) { return []byte(s), nil }
func (s stringEncoder) Length() int             { return len(s) }
