package projectionbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/projections"
)

// BenchLiveOptions configures BenchLive.
type BenchLiveOptions struct {
	// Config is the projector configuration; Kafka.Brokers is required. The topics are created
	// if missing.
	Config projections.Config
	// Postgres holds the parking tables (projections.EnsureSchema is run).
	Postgres *pgxpool.Pool
	// Store is the MySQL message store; Tenant must be provisioned in it.
	Store projections.MessageStore
	// Tenant receives the events. Use a fresh tenant: the benchmark writes into its live tables.
	Tenant domain.TenantID
	// Events is how many group messages are sent. Default 200000.
	Events int
	// Topics is how many group conversations they are spread over. Default 100.
	Topics int
	// Out receives progress and the result. Nil discards.
	Out io.Writer
	// Logger receives the projector's logs. Default: discard.
	Logger *slog.Logger
}

// BenchResult is a throughput measurement.
type BenchResult struct {
	Events   int
	Duration time.Duration
	// PerSecond is Events / Duration.
	PerSecond float64
	// CPU is the CPU time (user and system) this process spent during Duration, zero where it
	// was not measured. Under a loaded machine it is a steadier figure than PerSecond.
	CPU time.Duration
}

func (r BenchResult) String() string {
	s := fmt.Sprintf("%d events in %s: %.0f events/s", r.Events, r.Duration.Round(time.Millisecond), r.PerSecond)
	if r.CPU > 0 && r.Events > 0 {
		s += fmt.Sprintf(", %.3f CPU s per 1,000 events (%.2f CPU s in all)", r.CPU.Seconds()*1000/float64(r.Events), r.CPU.Seconds())
	}
	return s
}

// processCPU returns the CPU time (user and system) this process has used so far, or zero where
// the platform does not say.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchLive measures the live messages-mysql projection: it publishes Events group-message
// events over Topics conversations to Kafka (not timed), then runs a projector in a consumer
// group of its own from the oldest offset and times it from start until every event is in MySQL.
// The time includes joining the consumer group.
func BenchLive(ctx context.Context, o BenchLiveOptions) (BenchResult, error) {
	if o.Events <= 0 {
		o.Events = 200_000
	}
	if o.Topics <= 0 {
		o.Topics = 100
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Postgres == nil || o.Store == nil || o.Tenant.IsZero() {
		return BenchResult{}, errors.New("projections: bench: postgres, store and tenant are required")
	}
	if err := projections.EnsureSchema(ctx, o.Postgres); err != nil {
		return BenchResult{}, err
	}
	if err := tkafka.EnsureTopics(ctx, o.Config.Kafka); err != nil {
		return BenchResult{}, err
	}
	fmt.Fprintf(o.Out, "publishing %d group-message events over %d topics\n", o.Events, o.Topics)
	if err := publishBenchEvents(o.Config.Kafka, o.Tenant, o.Events, o.Topics); err != nil {
		return BenchResult{}, err
	}
	group := "imledger.bench.messages.mysql." + strconv.FormatInt(time.Now().UnixNano(), 36)
	o.Config.InitialOffset = projections.OffsetOldest
	p, err := projections.NewProjector(o.Config, projections.Deps{Postgres: o.Postgres, Logger: o.Logger}, projections.MessagesMySQL(o.Store, group))
	if err != nil {
		return BenchResult{}, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	start, cpu0 := time.Now(), processCPU()
	go func() { done <- p.Run(runCtx) }()
	fmt.Fprintf(o.Out, "projecting in consumer group %s\n", group)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	lastReport := start
	for int(p.Metrics().Applied(group)) < o.Events {
		select {
		case err := <-done:
			return BenchResult{}, fmt.Errorf("projections: bench: projector stopped: %v", err)
		case <-ctx.Done():
			return BenchResult{}, ctx.Err()
		case now := <-tick.C:
			if now.Sub(lastReport) >= 2*time.Second {
				lastReport = now
				fmt.Fprintf(o.Out, "  %d/%d applied after %s\n", int(p.Metrics().Applied(group)), o.Events, now.Sub(start).Round(time.Millisecond))
			}
		}
	}
	d, cpu := time.Since(start), processCPU()-cpu0
	cancel()
	<-done
	res := BenchResult{Events: o.Events, Duration: d, PerSecond: float64(o.Events) / d.Seconds(), CPU: cpu}
	fmt.Fprintf(o.Out, "live projection into MySQL: %s\n", res)
	return res, nil
}

// benchEvents builds n group-message sent events over topics conversations, seqs in order, with
// their content sealed by seal as serve writes it when seal is not nil.
func benchEvents(ctx context.Context, tenant domain.TenantID, n, topics int, seal domain.Sealer, each func(domain.Envelope) error) error {
	plain, _ := json.Marshal("benchmark message with a little bit of text in it")
	for i := 0; i < n; i++ {
		g := int64(i%topics + 1)
		seq := int64(i/topics + 1)
		topic := "grp" + strconv.FormatInt(g, 10)
		content, err := domain.SealContentRaw(ctx, seal, tenant, domain.UserID(1+i%50), time.Now(), plain)
		if err != nil {
			return err
		}
		env, err := domain.NewEnvelope(tenant, topic, seq, domain.EventGroupMessageSent,
			domain.Actor{Type: domain.ActorUser, ID: strconv.FormatInt(g, 10)},
			domain.MessageSent{MessageID: topic + "-" + strconv.FormatInt(seq, 10), Topic: topic, GroupID: g, Seq: seq,
				From: domain.UserID(1 + i%50), ClientMsgID: "b" + strconv.Itoa(i), MsgType: domain.MsgText,
				Content: content, SentAt: time.Now().UTC()})
		if err != nil {
			return err
		}
		if err := each(env); err != nil {
			return err
		}
	}
	return nil
}

func publishBenchEvents(kcfg tkafka.Config, tenant domain.TenantID, n, topics int) error {
	producer, err := tkafka.NewSyncProducer(kcfg)
	if err != nil {
		return err
	}
	defer producer.Close()
	topic := kcfg.Topic(tkafka.TopicGroupMessagePersist)
	batch := make([]*sarama.ProducerMessage, 0, 5000)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := producer.SendMessages(batch)
		batch = batch[:0]
		return err
	}
	err = benchEvents(context.Background(), tenant, n, topics, nil, func(env domain.Envelope) error {
		value, err := json.Marshal(env)
		if err != nil {
			return err
		}
		batch = append(batch, &sarama.ProducerMessage{Topic: topic,
			Key:   sarama.StringEncoder(tenant.String() + ":" + env.StreamID),
			Value: sarama.ByteEncoder(value),
			Headers: []sarama.RecordHeader{{Key: []byte("event_id"), Value: []byte(env.EventID.String())},
				{Key: []byte("event_type"), Value: []byte(env.EventType)},
				{Key: []byte("tenant_id"), Value: []byte(tenant.String())},
				{Key: []byte("stream_version"), Value: []byte(strconv.FormatInt(env.StreamVersion, 10))}}})
		if len(batch) == cap(batch) {
			return flush()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("projections: bench: publish: %w", err)
	}
	if err := flush(); err != nil {
		return fmt.Errorf("projections: bench: publish: %w", err)
	}
	return nil
}
