package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/domain"
)

// Publisher produces one Kafka record and waits for the broker's ack. The binary backs it with
// the safe producer of internal/kafka.
type Publisher interface {
	Publish(ctx context.Context, topic string, key string, value []byte, headers map[string]string) error
}

// Deps are the collaborators of a Consumer.
type Deps struct {
	// Pool is the event store's pool, where admin_commands and admin_command_failures live.
	// Required.
	Pool *pgxpool.Pool
	// Subscriber consumes im.admin.command in Config.ConsumerGroup with KafkaUnmarshaler.
	// Required.
	Subscriber message.Subscriber
	// CommandTopic is the full name of im.admin.command. Required.
	CommandTopic string
	// Publisher produces results and dead letters. Required.
	Publisher Publisher
	// Handlers run the commands. Required.
	Handlers Handlers
	// Owner names this consumer in its claims; the node id. Required.
	Owner string
	// Logger receives the consumer's logs. Default: discard.
	Logger *slog.Logger
	// Registerer receives the metrics. Optional.
	Registerer prometheus.Registerer
}

// Consumer runs admin commands from Kafka: a watermill router with one handler for
// im.admin.command, behind the middleware PoisonQueue (outermost), Retry, Recoverer.
//
// Guarantees: each command (event_id) is claimed once per consumer group in PostgreSQL before it
// runs, so a redelivered or reproduced command is answered with its first result and never runs
// twice; a claim whose consumer died is taken over after Config.ClaimTimeout, and the commands
// whose events are already stored (found by causation_id) are then answered succeeded without
// running again. A command is acked only after its result is stored and published.
type Consumer struct {
	cfg     Config
	deps    Deps
	ledger  *ledger
	disp    *dispatcher
	log     *slog.Logger
	metrics *metrics

	mu      sync.Mutex
	running bool
}

// New validates cfg and deps and returns a Consumer; nothing runs until Run.
func New(cfg Config, deps Deps) (*Consumer, error) {
	cfg.setDefaults()
	var errs []error
	errs = append(errs, cfg.Validate())
	if cfg.ResultTopic == "" || cfg.DeadLetterTopic == "" || deps.CommandTopic == "" {
		errs = append(errs, errors.New("admin: the command, result and dead-letter topics are required"))
	}
	if deps.Pool == nil || deps.Subscriber == nil || deps.Publisher == nil || deps.Owner == "" {
		errs = append(errs, errors.New("admin: Pool, Subscriber, Publisher and Owner are required"))
	}
	h := deps.Handlers
	if h.Tenants == nil || h.Lookup == nil || h.Accounts == nil || h.Groups == nil || h.GroupStates == nil ||
		h.Messages == nil || h.Sender == nil || h.Broadcaster == nil || h.Events == nil {
		errs = append(errs, errors.New("admin: every field of Handlers is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(deps.Registerer)
	if err != nil {
		return nil, err
	}
	log := deps.Logger.With("consumer_group", cfg.ConsumerGroup)
	owner := deps.Owner + "/" + uuid.NewString()[:8] // a restarted process does not resume its old claims as its own
	return &Consumer{cfg: cfg, deps: deps, log: log, metrics: m,
		ledger: &ledger{pool: deps.Pool, group: cfg.ConsumerGroup, owner: owner, timeout: cfg.ClaimTimeout},
		disp:   newDispatcher(deps.Handlers, log)}, nil
}

// errBusy is a command claimed by another live consumer: it is redelivered, never dead-lettered.
var errBusy = domain.Retryable("admin command", errors.New("claimed by another consumer"))

// Run consumes until ctx ends or the subscriber fails for good, then waits for the command in
// flight (up to Config.CloseTimeout). It returns nil after ctx ended. A Consumer runs once.
func (c *Consumer) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("admin: consumer already ran")
	}
	c.running = true
	c.mu.Unlock()
	wlog := watermillLogger{c.log}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: c.cfg.CloseTimeout}, wlog)
	if err != nil {
		return fmt.Errorf("admin: router: %w", err)
	}
	poison, err := middleware.PoisonQueueWithFilter(&poisonSink{c: c}, c.cfg.DeadLetterTopic, func(err error) bool {
		return !errors.Is(err, errBusy) && !errors.Is(err, context.Canceled)
	})
	if err != nil {
		return fmt.Errorf("admin: poison queue: %w", err)
	}
	retry := middleware.Retry{
		MaxRetries: c.cfg.Retry.MaxRetries, InitialInterval: c.cfg.Retry.InitialInterval,
		MaxInterval: c.cfg.Retry.MaxInterval, Multiplier: c.cfg.Retry.Multiplier, RandomizationFactor: 0.2,
		ShouldRetry: func(p middleware.RetryParams) bool {
			again := !errors.Is(p.Err, context.Canceled)
			if again && p.RetryNum < c.cfg.Retry.MaxRetries {
				c.metrics.retries.Inc()
			}
			return again
		},
		ResetContextOnRetry: true,
	}
	h := router.AddConsumerHandler("admin-commands", c.deps.CommandTopic, c.deps.Subscriber, c.handle)
	h.AddMiddleware(poison, retry.Middleware, middleware.Recoverer)
	err = router.Run(ctx)
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("admin: router: %w", err)
	}
	return nil
}

// handle is the watermill handler of one command record.
func (c *Consumer) handle(msg *message.Message) error {
	ctx := msg.Context()
	start := time.Now()
	key := msg.Metadata.Get(MetaKafkaKey)
	cmd, decodeErr := decodeCommand(msg.Payload)
	if decodeErr != nil && cmd.EventID == uuid.Nil {
		// Nothing to deduplicate on: answer, and ack.
		res := c.rejected(cmd, decodeErr)
		c.observe(res, start)
		return c.publish(ctx, key, res)
	}
	st, stored, attempts, err := c.ledger.claim(ctx, cmd)
	if err != nil {
		return err
	}
	switch st {
	case claimFinished:
		return c.publish(ctx, key, *stored)
	case claimBusy:
		return errBusy
	}
	res, err := c.execute(ctx, cmd, decodeErr, st, attempts)
	if err != nil {
		c.log.WarnContext(ctx, "admin command failed; it is retried", "event_id", cmd.EventID.String(),
			"event_type", cmd.EventType, "tenant_id", cmd.TenantID, "attempt", attempts, "err", err)
		return err
	}
	c.observe(res, start)
	return c.answer(ctx, key, cmd.EventID, res)
}

// execute checks and runs a claimed command. It returns the command's result, or an error when
// it failed transiently and must be tried again.
func (c *Consumer) execute(ctx context.Context, cmd domain.AdminCommand, decodeErr error, st claimState, attempts int) (domain.AdminResult, error) {
	if decodeErr != nil {
		return c.rejected(cmd, decodeErr), nil
	}
	chk, err := check(cmd, c.cfg.AllowedSources)
	if err != nil {
		return c.rejected(cmd, err), nil
	}
	if !chk.info.CreatesTenant {
		if _, err := c.deps.Handlers.Lookup.Lookup(ctx, chk.tenant); err != nil {
			return c.outcome(cmd, nil, err)
		}
	}
	payload, err := decodePayload(chk)
	if err != nil {
		return c.rejected(cmd, err), nil
	}
	if st == claimTakeover || attempts > 1 {
		// An earlier run may have committed before it failed or died: its events carry the
		// command's id as causation id.
		done, err := c.deps.Handlers.Events.FindCaused(ctx, chk.tenant, cmd.EventID.String())
		if err != nil {
			return domain.AdminResult{}, err
		}
		if done {
			return c.result(cmd, domain.AdminSucceeded, "", nil, map[string]any{"recovered": true}), nil
		}
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CommandTimeout)
	defer cancel()
	data, err := c.disp.dispatch(cctx, run{checked: chk, payload: payload})
	return c.outcome(cmd, data, err)
}

// outcome turns a command's data and error into its result, or returns a transient error.
func (c *Consumer) outcome(cmd domain.AdminCommand, data any, err error) (domain.AdminResult, error) {
	if err == nil {
		return c.result(cmd, domain.AdminSucceeded, "", nil, data), nil
	}
	reason, details, rejected := classify(err)
	if !rejected {
		return domain.AdminResult{}, err
	}
	return c.result(cmd, domain.AdminRejected, reason, details, nil), nil
}

// rejected is the result of a command refused with err (a rejection or a refusal).
func (c *Consumer) rejected(cmd domain.AdminCommand, err error) domain.AdminResult {
	reason, details, _ := classify(err)
	return c.result(cmd, domain.AdminRejected, reason, details, nil)
}

// result builds a result of cmd.
func (c *Consumer) result(cmd domain.AdminCommand, status, reason string, details map[string]any, data any) domain.AdminResult {
	r := domain.AdminResult{TenantID: cmd.TenantID, EventType: cmd.EventType, TraceID: cmd.TraceID, Status: status,
		Reason: reason, Details: details, ConsumerGroup: c.cfg.ConsumerGroup, SourceService: domain.SourceService,
		OccurredAt: time.Now().UTC()}
	if cmd.EventID != uuid.Nil {
		r.CommandEventID = cmd.EventID.String()
	}
	if cmd.ParentEventID != nil {
		r.ParentEventID = cmd.ParentEventID.String()
	}
	if data != nil {
		if b, err := json.Marshal(data); err == nil {
			r.Result = b
		}
	}
	return r
}

// answer stores res as the command's final result and publishes it. A claim taken over meanwhile
// is left to its new owner.
func (c *Consumer) answer(ctx context.Context, key string, id uuid.UUID, res domain.AdminResult) error {
	ok, err := c.ledger.finish(ctx, id, res)
	if err != nil {
		return err
	}
	if !ok {
		c.log.WarnContext(ctx, "admin command was taken over by another consumer; it answers", "event_id", id.String())
		return nil
	}
	if res.Status != domain.AdminSucceeded {
		c.log.InfoContext(ctx, "admin command "+res.Status, "event_id", id.String(), "event_type", res.EventType,
			"tenant_id", res.TenantID, "reason", res.Reason)
	}
	return c.publish(ctx, key, res)
}

// publish produces res on the result topic under the command's key.
func (c *Consumer) publish(ctx context.Context, key string, res domain.AdminResult) error {
	body, err := json.Marshal(res)
	if err != nil {
		return err
	}
	headers := map[string]string{"command_event_id": res.CommandEventID, "event_type": res.EventType,
		"tenant_id": res.TenantID, "status": res.Status}
	if err := c.deps.Publisher.Publish(ctx, c.cfg.ResultTopic, key, body, headers); err != nil {
		return domain.Retryable("publish admin result", err)
	}
	return nil
}

func (c *Consumer) observe(res domain.AdminResult, start time.Time) {
	typ := res.EventType
	if _, ok := domain.LookupAdminCommand(domain.AdminCommandType(typ)); !ok {
		typ = "unknown"
	}
	c.metrics.commands.WithLabelValues(typ, res.Status).Inc()
	c.metrics.duration.WithLabelValues(typ).Observe(time.Since(start).Seconds())
}
