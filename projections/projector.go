package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	tkafka "github.com/imledger/imledger/internal/kafka"
)

// Deps are the projector's collaborators.
type Deps struct {
	// Postgres holds the dead letters and parked events (see EnsureSchema). Required. While it
	// is unreachable events are retried, never applied unchecked or dropped.
	Postgres *pgxpool.Pool
	// Logger receives the projector's logs. Default: slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics. Nil: metrics are kept but not registered.
	Registerer prometheus.Registerer
}

// Projector runs projections: one watermill router per process, one handler per projection
// and topic, each projection in its own Kafka consumer group as one member consuming all its
// topics (one Kafka client and fetch loop per projection). Every handler has the middleware
// PoisonQueue (outermost), Retry with exponential backoff, then Recoverer.
//
// Delivery is at least once: an event is acked (its offset may be committed) only after its
// read-model write committed, or after it was dead-lettered or parked in Postgres. Events of
// one conversation share a partition and are applied in order; a dead letter parks the
// conversation's later events until an operator replays or skips it (see DeadLetters).
type Projector struct {
	cfg         Config
	projections []Projection
	parking     parkingStore
	metrics     *Metrics
	log         *slog.Logger

	mu      sync.Mutex
	running bool
}

// NewProjector validates cfg and the projections and returns a Projector; nothing connects
// until Run. Consumer groups must be distinct across projections.
func NewProjector(cfg Config, deps Deps, projections ...Projection) (*Projector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	var errs []error
	if deps.Postgres == nil {
		errs = append(errs, errors.New("projections: deps: postgres pool is required"))
	}
	if len(projections) == 0 {
		errs = append(errs, errors.New("projections: at least one projection is required"))
	}
	groups := map[string]bool{}
	for _, p := range projections {
		errs = append(errs, p.Validate())
		if groups[p.ConsumerGroup] {
			errs = append(errs, fmt.Errorf("projections: consumer group %s used twice", p.ConsumerGroup))
		}
		groups[p.ConsumerGroup] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	m, err := NewMetrics(deps.Registerer)
	if err != nil {
		return nil, fmt.Errorf("projections: register metrics: %w", err)
	}
	return &Projector{cfg: cfg, projections: projections, parking: parkingStore{pool: deps.Postgres},
		metrics: m, log: log.With("component", "projector")}, nil
}

// Metrics returns the projector's metrics.
func (p *Projector) Metrics() *Metrics { return p.metrics }

// saramaConfig is the consumer configuration of a subscriber to topics. Every projector
// long-polls: the broker answers its fetch at the first record and holds an empty one for
// kafka.fetch_idle_wait, so an idle projector costs a poll every few seconds, not several a
// second. With FetchLinger set, a projector of the message topics, which carry most records,
// also spaces its fetches by it (see fetchLinger), so one fetch carries many records instead of
// one per relay batch.
func (p *Projector) saramaConfig(topics []string) (*sarama.Config, error) {
	sc, err := tkafka.NewSaramaConfig(p.cfg.Kafka)
	if err != nil {
		return nil, err
	}
	sc.Consumer.Return.Errors = true
	sc.ChannelBufferSize = p.cfg.ChannelBufferSize
	if p.cfg.FetchLinger > 0 && slices.ContainsFunc(topics, tkafka.CarriesMessages) {
		sc.Consumer.Interceptors = []sarama.ConsumerInterceptor{&fetchLinger{hold: p.cfg.FetchLinger, gap: answerGap}}
	}
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	if p.cfg.InitialOffset == OffsetNewest {
		sc.Consumer.Offsets.Initial = sarama.OffsetNewest
	}
	return sc, nil
}

// Run consumes until ctx ends or a subscriber fails for good, then waits for handlers in flight
// (up to Config.CloseTimeout). It returns nil after ctx ended. Topics must exist (see
// internal/kafka.EnsureTopics). A Projector runs once.
func (p *Projector) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return errors.New("projections: projector already ran")
	}
	p.running = true
	p.mu.Unlock()

	producer, err := tkafka.NewSyncProducer(p.cfg.Kafka)
	if err != nil {
		return fmt.Errorf("projections: dead-letter producer: %w", err)
	}
	defer producer.Close()
	wlog := newWatermillLogger(p.log)
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: p.cfg.CloseTimeout}, wlog)
	if err != nil {
		return fmt.Errorf("projections: router: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var runners []*runner
	for _, pr := range p.projections {
		r := newRunner(pr, p.cfg, p.parking, p.metrics, p.log)
		if err := p.addHandlers(router, r, producer, wlog); err != nil {
			return err
		}
		runners = append(runners, r)
	}
	for _, r := range runners {
		r.batch.start(runCtx)
	}
	go p.lagLoop(runCtx, p.cfg.LagInterval)
	err = router.Run(runCtx)
	cancel()
	for _, r := range runners {
		r.batch.wait()
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("projections: router: %w", err)
	}
	return nil
}

// addHandlers adds one handler per topic of r's projection, all in r's consumer group.
func (p *Projector) addHandlers(router *message.Router, r *runner, producer sarama.SyncProducer, wlog watermill.LoggerAdapter) error {
	pr := r.p
	sink := &deadLetterSink{group: pr.ConsumerGroup, producer: producer, parking: p.parking, metrics: p.metrics, log: r.log,
		settled: r.settled, opening: r.opened.invalidate}
	poison, err := middleware.PoisonQueueWithFilter(sink, p.cfg.Kafka.Topic(tkafka.TopicDeadLetter),
		func(err error) bool { return !isTransient(err) })
	if err != nil {
		return fmt.Errorf("projections: poison queue: %w", err)
	}
	retries := p.metrics.retries.WithLabelValues(pr.ConsumerGroup)
	retry := middleware.Retry{
		MaxRetries:          p.cfg.Retry.MaxRetries,
		InitialInterval:     p.cfg.Retry.InitialInterval,
		MaxInterval:         p.cfg.Retry.MaxInterval,
		Multiplier:          p.cfg.Retry.Multiplier,
		RandomizationFactor: 0.2,
		ShouldRetry: func(rp middleware.RetryParams) bool {
			_, again := classify(rp.Err)
			if again && rp.RetryNum < p.cfg.Retry.MaxRetries {
				retries.Inc()
			}
			return again
		},
		ResetContextOnRetry: true,
	}
	// One subscriber, one member of the projection's consumer group, for all its topics.
	topics := make([]string, len(pr.Topics))
	for i, base := range pr.Topics {
		topics[i] = p.cfg.Kafka.Topic(base)
	}
	sc, err := p.saramaConfig(pr.Topics)
	if err != nil {
		return err
	}
	sub, err := NewPipelinedSubscriber(PipelinedSubscriberConfig{
		Brokers:         p.cfg.Kafka.Brokers,
		ConsumerGroup:   pr.ConsumerGroup,
		Sarama:          sc,
		Unmarshaler:     envelopeUnmarshaler{},
		InFlight:        p.cfg.InFlight,
		NackResendSleep: p.cfg.NackResendSleep,
		Topics:          topics,
		Prepare:         prepareRecord,
		OnSession:       r.opened.invalidate,
	}, wlog)
	if err != nil {
		return fmt.Errorf("projections: subscriber %s: %w", pr.ConsumerGroup, err)
	}
	for _, topic := range topics {
		h := router.AddConsumerHandler(pr.Name+"@"+topic, topic, sub, r.handle)
		h.AddMiddleware(poison, retryAfterFirstTry(retry), middleware.Recoverer)
	}
	return nil
}
