package projtest

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strconv"
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

// Harness is one isolated test environment: an embedded Kafka broker with prefixed topics, a
// fresh Postgres database with the parking schema, and a producer.
type Harness struct {
	t testing.TB
	// Kafka is the harness's Kafka settings: the embedded broker and a topic prefix of its own.
	Kafka tkafka.Config
	// Pool is a fresh PostgreSQL database with the parking schema.
	Pool *pgxpool.Pool
	// PgURL is the database's URL.
	PgURL string
	// Producer sends records to the harness's topics.
	Producer sarama.SyncProducer
}

// NewHarness starts an isolated environment for t: prefixed topics on the embedded broker, a fresh
// PostgreSQL database with the parking schema, and a producer.
func NewHarness(t testing.TB) *Harness {
	t.Helper()
	ctx := Ctx(t)
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
	return &Harness{t: t, Kafka: kcfg, Pool: pool, PgURL: pgURL, Producer: producer}
}

// Ctx is a context that ends with the test, or after two minutes.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Logger logs warnings to stderr, or everything with IM_TEST_VERBOSE set.
func Logger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("IM_TEST_VERBOSE") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// Record is a Kafka record as the relay publishes it.
func Record(topic string, env domain.Envelope) *sarama.ProducerMessage {
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

// Publish sends envs to the topic of their category, in order.
func (h *Harness) Publish(envs ...domain.Envelope) {
	h.t.Helper()
	msgs := make([]*sarama.ProducerMessage, 0, len(envs))
	for _, e := range envs {
		info, ok := domain.LookupEventType(e.EventType)
		if !ok {
			h.t.Fatalf("unknown event type %s", e.EventType)
		}
		topic, _ := h.Kafka.CategoryTopic(string(info.Category))
		msgs = append(msgs, Record(topic, e))
	}
	for start := 0; start < len(msgs); start += 5000 {
		if err := h.Producer.SendMessages(msgs[start:min(start+5000, len(msgs))]); err != nil {
			h.t.Fatal(err)
		}
	}
}

// Config is a projector configuration with short retries for tests.
func (h *Harness) Config() projections.Config {
	return projections.Config{
		Kafka:           h.Kafka,
		Retry:           projections.RetryConfig{MaxRetries: 2, InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond},
		NackResendSleep: 50 * time.Millisecond,
		LagInterval:     200 * time.Millisecond,
		CloseTimeout:    5 * time.Second,
	}
}

// Run starts a projector until the test ends and returns it with its metrics registry.
func (h *Harness) Run(cfg projections.Config, projs ...projections.Projection) (*projections.Projector, *prometheus.Registry) {
	h.t.Helper()
	reg := prometheus.NewRegistry()
	p, err := projections.NewProjector(cfg, projections.Deps{Postgres: h.Pool, Logger: Logger(), Registerer: reg}, projs...)
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

// Eventually calls f until it returns nil or timeout passes, then fails with f's last error.
func Eventually(t testing.TB, timeout time.Duration, f func() error) {
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

// DeadLetterRecords reads every record of the dead-letter topic.
func (h *Harness) DeadLetterRecords(want int) []*kgo.Record {
	h.t.Helper()
	c, err := kgo.NewClient(kgo.SeedBrokers(h.Kafka.Brokers...), kgo.ConsumeTopics(h.Kafka.Topic(tkafka.TopicDeadLetter)),
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
