package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/IBM/sarama"
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

// BatchPublisher is a Publisher that can also produce many records in one flush and wait for all
// their acks (sarama.SyncProducer.SendMessages). The consumer answers a batch of commands with
// one PublishBatch when its Publisher is one; records of one key keep their order.
type BatchPublisher interface {
	Publisher
	PublishBatch(ctx context.Context, msgs []OutMessage) error
}

// OutMessage is one record a BatchPublisher produces.
type OutMessage struct {
	Topic   string
	Key     string
	Value   []byte
	Headers map[string]string
}

// Deps are the collaborators of a Consumer.
type Deps struct {
	// Pool is the event store's pool, where admin_commands and admin_command_failures live.
	// Required.
	Pool *pgxpool.Pool
	// Group consumes im.admin.command: a sarama consumer group named Config.ConsumerGroup (its
	// offsets auto-committed, as sarama does by default). Run closes it. Required.
	Group sarama.ConsumerGroup
	// CommandTopic is the full name of im.admin.command. Required.
	CommandTopic string
	// Publisher produces results and dead letters; a BatchPublisher answers a batch in one flush.
	// Required.
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

// Consumer runs admin commands from Kafka.
//
// Each partition of im.admin.command is read in batches of what has arrived (up to
// Config.MaxBatch records): the batch is claimed in PostgreSQL with one statement, its commands
// run concurrently across record keys (up to Config.Concurrency commands at once per consumer)
// and in record order within a key, their results are stored with one statement and produced
// with one flush, and only then is the offset after the batch marked. A command that failed
// transiently is retried with backoff inside its key's turn (the key's later commands wait), and
// past Config.Retry.MaxRetries is recorded in admin_command_failures, produced to
// im.dead.letter and answered failed.
//
// Guarantees: each command (event_id) is claimed once per consumer group in PostgreSQL before it
// runs, so a redelivered or reproduced command is answered with its first result and never runs
// twice; a claim whose consumer died is taken over after Config.ClaimTimeout, and the commands
// whose events are already stored (found by causation_id) are then answered succeeded without
// running again. A record's offset is committed only after its result is stored and published;
// a consumer stopped mid-batch gives up the claims of the commands it had not started, so
// whoever gets them next runs them at once.
type Consumer struct {
	cfg     Config
	deps    Deps
	ledger  *ledger
	disp    *dispatcher
	log     *slog.Logger
	metrics *metrics
	slots   chan struct{} // commands running at once

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
	if deps.Pool == nil || deps.Group == nil || deps.Publisher == nil || deps.Owner == "" {
		errs = append(errs, errors.New("admin: Pool, Group, Publisher and Owner are required"))
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
	return &Consumer{cfg: cfg, deps: deps, log: log, metrics: m, slots: make(chan struct{}, cfg.Concurrency),
		ledger: newLedger(deps.Pool, cfg.ConsumerGroup, owner, cfg.ClaimTimeout),
		disp:   newDispatcher(deps.Handlers, log)}, nil
}

// Run consumes until ctx ends or the consumer group fails for good, then waits for the commands
// in flight (up to Config.CloseTimeout) and closes the group. It returns nil after ctx ended. A
// Consumer runs once.
func (c *Consumer) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("admin: consumer already ran")
	}
	c.running = true
	c.mu.Unlock()
	// Commands in flight outlive ctx by up to CloseTimeout: they finish and answer, or are
	// redelivered.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopWork := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(c.cfg.CloseTimeout, cancelWork)
		context.AfterFunc(work, func() { t.Stop() })
	})
	defer stopWork()
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		for err := range c.deps.Group.Errors() {
			c.log.WarnContext(ctx, "admin command consumer group", "err", err)
		}
	}()
	h := &groupHandler{c: c, work: work}
	var runErr error
	for ctx.Err() == nil {
		err := c.deps.Group.Consume(ctx, []string{c.deps.CommandTopic}, h)
		if ctx.Err() != nil {
			break
		}
		if errors.Is(err, sarama.ErrClosedConsumerGroup) {
			runErr = fmt.Errorf("admin: consumer group closed: %w", err)
			break
		}
		if err != nil {
			c.log.WarnContext(ctx, "admin command consumer group session failed; joining again", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	if err := c.deps.Group.Close(); err != nil && runErr == nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
		c.log.WarnContext(ctx, "admin: close the consumer group", "err", err)
	}
	<-errsDone
	return runErr
}

// groupHandler is the sarama.ConsumerGroupHandler of a Consumer.
type groupHandler struct {
	c    *Consumer
	work context.Context // outlives a session by Config.CloseTimeout after Run's ctx ended
}

func (h *groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim reads one partition in batches until the session ends.
func (h *groupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	c := h.c
	var held *sarama.ConsumerMessage // a record that starts the next batch
	for {
		batch := make([]*sarama.ConsumerMessage, 0, 16)
		if held != nil {
			batch, held = append(batch, held), nil
		} else {
			select {
			case m, ok := <-claim.Messages():
				if !ok {
					return nil
				}
				batch = append(batch, m)
			case <-sess.Context().Done():
				return nil
			}
		}
		ids := map[string]bool{}
		if id := recordEventID(batch[0]); id != "" {
			ids[id] = true
		}
	fill:
		for len(batch) < c.cfg.MaxBatch {
			select {
			case m, ok := <-claim.Messages():
				if !ok {
					break fill
				}
				// A command produced twice in a row goes to the next batch, after the first
				// is answered, so the repeat is answered from the ledger.
				if id := recordEventID(m); id != "" {
					if ids[id] {
						held = m
						break fill
					}
					ids[id] = true
				}
				batch = append(batch, m)
			default:
				break fill
			}
		}
		if !c.processBatch(sess.Context(), h.work, batch) {
			return nil // the session ended mid-batch: the rest is redelivered
		}
		sess.MarkMessage(batch[len(batch)-1], "")
	}
}

// recordEventID returns the event_id of a command record cheaply (its header when the producer
// set one, else the envelope's field), "" when it has none.
func recordEventID(m *sarama.ConsumerMessage) string {
	for _, h := range m.Headers {
		if h != nil && string(h.Key) == "event_id" {
			return string(h.Value)
		}
	}
	var probe struct {
		EventID string `json:"event_id"`
	}
	_ = json.Unmarshal(m.Value, &probe)
	return probe.EventID
}

// item is one record of a batch on its way to its answer.
type item struct {
	msg     *sarama.ConsumerMessage
	key     string
	cmd     domain.AdminCommand
	decErr  error
	fresh   bool // claimed by the batch's insert
	started bool // its turn came (claims of the unstarted are given up when the session ends)
	start   time.Time

	res    *domain.AdminResult // the answer, when there is one
	stored bool                // res is the ledger's stored answer: publish only
	done   bool                // answered (or given up for a busy claim)
}

// processBatch answers every record of batch. It reports false when the session ended before
// every record was answered; nothing of the batch is then marked.
func (c *Consumer) processBatch(sess, work context.Context, batch []*sarama.ConsumerMessage) bool {
	items := make([]*item, len(batch))
	var claimable []*item
	for i, m := range batch {
		it := &item{msg: m, key: string(m.Key), start: time.Now()}
		it.cmd, it.decErr = decodeCommand(m.Value)
		if it.decErr != nil && it.cmd.EventID == uuid.Nil {
			// Nothing to deduplicate on: answered at once.
			r := c.rejected(it.cmd, it.decErr)
			it.res, it.stored, it.done = &r, true, true
		} else {
			claimable = append(claimable, it)
		}
		items[i] = it
	}
	if len(claimable) > 0 {
		if !c.claimBatch(sess, work, claimable) {
			return false
		}
	}
	// Chains of one key run in record order; chains run concurrently.
	chains := map[string][]*item{}
	var order []string
	for _, it := range claimable {
		if _, ok := chains[it.key]; !ok {
			order = append(order, it.key)
		}
		chains[it.key] = append(chains[it.key], it)
	}
	var wg sync.WaitGroup
	for _, k := range order {
		chain := chains[k]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, it := range chain {
				if !c.runItem(sess, work, it) {
					return // the session ended: the key's later commands wait for the next owner
				}
			}
		}()
	}
	wg.Wait()
	complete := true
	var unstarted []uuid.UUID
	for _, it := range claimable {
		if !it.done {
			complete = false
			if !it.started && it.fresh {
				unstarted = append(unstarted, it.cmd.EventID)
			}
		}
	}
	if len(unstarted) > 0 {
		if err := c.ledger.release(context.WithoutCancel(work), unstarted); err != nil {
			c.log.WarnContext(work, "admin: give up the claims of unstarted commands", "commands", len(unstarted), "err", err)
		}
	}
	// Store the answers of the batch with one statement, then publish them with one flush.
	var finish []*item
	for _, it := range items {
		if it.done && it.res != nil && !it.stored {
			finish = append(finish, it)
		}
	}
	for attempt := 0; len(finish) > 0; attempt++ {
		lost, err := c.ledger.finishBatch(work, finish)
		if err == nil {
			for _, it := range finish {
				if lost[it.cmd.EventID] {
					c.log.WarnContext(work, "admin command was taken over by another consumer; it answers", "event_id", it.cmd.EventID.String())
					it.res = nil
				}
			}
			break
		}
		c.log.WarnContext(work, "admin: store the answers of a batch", "commands", len(finish), "attempt", attempt+1, "err", err)
		if !c.sleep(work, c.backoff(attempt)) {
			return false
		}
	}
	var out []OutMessage
	for _, it := range items {
		if it.res == nil || !it.done {
			continue
		}
		if !it.stored && it.res.Status != domain.AdminSucceeded {
			c.log.InfoContext(work, "admin command "+it.res.Status, "event_id", it.res.CommandEventID, "event_type", it.res.EventType,
				"tenant_id", it.res.TenantID, "reason", it.res.Reason)
		}
		if !it.stored || it.cmd.EventID == uuid.Nil {
			c.observe(*it.res, it.start)
		}
		m, err := c.resultMessage(it.key, *it.res)
		if err != nil {
			c.log.ErrorContext(work, "admin: encode a result", "err", err)
			continue
		}
		out = append(out, m)
	}
	for attempt := 0; len(out) > 0; attempt++ {
		err := c.publishAll(work, out)
		if err == nil {
			break
		}
		c.log.WarnContext(work, "admin: publish the results of a batch", "results", len(out), "attempt", attempt+1, "err", err)
		if !c.sleep(work, c.backoff(attempt)) {
			return false
		}
	}
	return complete
}

// claimBatch claims the commands of items: one insert for those seen for the first time, the
// single-row claim for the others (a repeat, a retry, a takeover). It reports false when the
// session ended first.
func (c *Consumer) claimBatch(sess, work context.Context, items []*item) bool {
	for attempt := 0; ; attempt++ {
		fresh, err := c.ledger.claimNew(work, items)
		if err == nil {
			for _, it := range items {
				it.fresh = fresh[it.cmd.EventID]
			}
			return true
		}
		c.log.WarnContext(work, "admin: claim a batch of commands", "commands", len(items), "attempt", attempt+1, "err", err)
		if sess.Err() != nil || !c.sleep(sess, c.backoff(attempt)) {
			return false
		}
	}
}

// runItem takes it to its answer: runs it with retries, dead-letters it past them. It reports
// false when the session ended first (it is then redelivered).
func (c *Consumer) runItem(sess, work context.Context, it *item) bool {
	if sess.Err() != nil {
		return false
	}
	select {
	case c.slots <- struct{}{}:
	case <-sess.Done():
		return false
	}
	defer func() { <-c.slots }()
	it.started = true
	st, attempts := claimNew, 1
	var lastErr error
	for retry := 0; ; retry++ {
		if !it.fresh || retry > 0 {
			var (
				stored *domain.AdminResult
				err    error
			)
			st, stored, attempts, err = c.ledger.claim(work, it.cmd)
			if err == nil && st == claimFinished {
				it.res, it.stored, it.done = stored, true, true
				return true
			}
			if err != nil || st == claimBusy {
				if sess.Err() != nil || !c.sleep(sess, c.backoff(retry)) {
					return false
				}
				continue
			}
		}
		res, err := c.safeExecute(work, it.cmd, it.decErr, st, attempts)
		if err == nil {
			it.res, it.done = &res, true
			return true
		}
		lastErr = err
		if errors.Is(err, context.Canceled) && work.Err() != nil {
			return false
		}
		c.log.WarnContext(work, "admin command failed; it is retried", "event_id", it.cmd.EventID.String(),
			"event_type", it.cmd.EventType, "tenant_id", it.cmd.TenantID, "attempt", attempts, "err", err)
		if retry >= c.cfg.Retry.MaxRetries {
			break
		}
		c.metrics.retries.Inc()
		if sess.Err() != nil || !c.sleep(sess, c.backoff(retry)) {
			return false
		}
	}
	// Past the retries: record, dead-letter and answer failed.
	for attempt := 0; ; attempt++ {
		res, err := c.deadLetter(work, it, lastErr)
		if err == nil {
			it.res, it.done = &res, true
			return true
		}
		c.log.WarnContext(work, "admin: dead-letter a command", "event_id", it.cmd.EventID.String(), "err", err)
		if sess.Err() != nil || !c.sleep(sess, c.backoff(attempt)) {
			return false
		}
	}
}

// safeExecute is execute with a panic turned into a transient error.
func (c *Consumer) safeExecute(ctx context.Context, cmd domain.AdminCommand, decodeErr error, st claimState, attempts int) (res domain.AdminResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("admin command panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return c.execute(ctx, cmd, decodeErr, st, attempts)
}

// backoff is the wait before retry n (from 0) of Config.Retry, with 20% jitter.
func (c *Consumer) backoff(n int) time.Duration {
	d := float64(c.cfg.Retry.InitialInterval) * math.Pow(c.cfg.Retry.Multiplier, float64(n))
	if d > float64(c.cfg.Retry.MaxInterval) {
		d = float64(c.cfg.Retry.MaxInterval)
	}
	return time.Duration(d * (0.8 + 0.4*rand.Float64()))
}

// sleep waits d; false when ctx ended first.
func (c *Consumer) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
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

// resultMessage is the record of res on the result topic under the command's key.
func (c *Consumer) resultMessage(key string, res domain.AdminResult) (OutMessage, error) {
	body, err := json.Marshal(res)
	if err != nil {
		return OutMessage{}, err
	}
	headers := map[string]string{"command_event_id": res.CommandEventID, "event_type": res.EventType,
		"tenant_id": res.TenantID, "status": res.Status}
	return OutMessage{Topic: c.cfg.ResultTopic, Key: key, Value: body, Headers: headers}, nil
}

// publishAll produces msgs: in one flush with a BatchPublisher, else one by one in order.
func (c *Consumer) publishAll(ctx context.Context, msgs []OutMessage) error {
	if bp, ok := c.deps.Publisher.(BatchPublisher); ok {
		if err := bp.PublishBatch(ctx, msgs); err != nil {
			return domain.Retryable("publish admin results", err)
		}
		return nil
	}
	for _, m := range msgs {
		if err := c.deps.Publisher.Publish(ctx, m.Topic, m.Key, m.Value, m.Headers); err != nil {
			return domain.Retryable("publish admin result", err)
		}
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
