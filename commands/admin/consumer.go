package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/admintrust"
	"github.com/imledger/imledger/internal/kafka"
)

// Publisher produces one Kafka record and waits for the broker's ack. The binary backs it with
// the safe producer of internal/kafka.
type Publisher interface {
	Publish(ctx context.Context, topic string, key string, value []byte, headers map[string]string) error
}

// BatchPublisher is a Publisher that can also produce many records in one flush and wait for all
// their acks (sarama.SyncProducer.SendMessages). The consumer answers a batch of commands with
// one PublishBatch when its Publisher is one; records of one key keep their order. When only some
// records were delivered, PublishBatch should return a *PublishBatchError naming the others
// (SaramaBatchError builds it), so the delivered ones are not produced twice.
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
// Trust (DESIGN §7a): a record is verified before anything else is read of it or written about
// it: its signature by one of Config.ProducerKeys and its signing time within
// Config.ReplayWindow; then the command is bound to the key (its tenant scope, the platform
// commands' need of a platform key, the actor the key's identity, with the key id the events
// and the result carry) and its secret fields must be sealed. A record refused so is answered on
// the result topic and nothing of it is written, so a forged record never takes the event_id of a
// genuine one in the ledger. A sealed secret is opened only right before the handler that needs
// it; what is stored or re-published of a command (failures, dead letters, results, logs) holds
// its secret fields redacted.
//
// Guarantees: each command (the envelope's event_id) is claimed once per consumer group in
// PostgreSQL before it runs, so a redelivered or reproduced command, on any partition, is
// answered with its first result and never runs twice (a copy that arrives while it runs, on this
// consumer or another, waits for that result), and an event_id reused for another tenant, type
// or payload is rejected event_id_reused; a record that is not a clean envelope is rejected
// before anything of it is written, and a command a store refuses for good fails alone, without
// retries, never holding its partition; a claim whose consumer died is taken over after
// Config.ClaimTimeout, and the commands whose events are already stored (found by causation_id)
// are then answered succeeded without running again. A result is at most Config.MaxResultBytes
// and is published once per record: a flush that delivered part of a batch's results produces
// only the rest again. A record's offset is committed only after its result is stored and published;
// a consumer stopped mid-batch gives up the claims of the commands it had not started, so
// whoever gets them next runs them at once.
type Consumer struct {
	cfg      Config
	deps     Deps
	verifier *admintrust.Verifier
	ledger   *ledger
	disp     *dispatcher
	log      *slog.Logger
	metrics  *metrics
	slots    chan struct{} // commands running at once

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
	verifier, err := admintrust.NewVerifier(cfg.ReplayWindow, cfg.ClockLeeway, cfg.ProducerKeys...)
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	opener, err := admintrust.NewOpener(cfg.SecretKeys...)
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	log := deps.Logger.With("consumer_group", cfg.ConsumerGroup)
	owner := deps.Owner + "/" + uuid.NewString()[:8] // a restarted process does not resume its old claims as its own
	return &Consumer{cfg: cfg, deps: deps, log: log, metrics: m, slots: make(chan struct{}, cfg.Concurrency), verifier: verifier,
		ledger: newLedger(deps.Pool, cfg.ConsumerGroup, owner, cfg.ClaimTimeout),
		disp:   newDispatcher(deps.Handlers, log, secrets{opener: opener, allowPlain: cfg.AllowUnsigned})}, nil
}

// Run consumes (with kafka.RunGroup) until ctx ends or the consumer group is closed elsewhere,
// then waits for the commands in flight (up to Config.CloseTimeout) and closes the group. It
// returns nil after ctx ended, and an error wrapping sarama.ErrClosedConsumerGroup when the group
// was closed elsewhere. A Consumer runs once.
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
	h := &groupHandler{c: c, work: work}
	if err := kafka.RunGroup(ctx, c.deps.Group, []string{c.deps.CommandTopic}, h, kafka.LogReport(c.log)); err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	return nil
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
	var held *item // a record that starts the next batch
	for {
		batch := make([]*item, 0, 16)
		if held != nil {
			batch, held = append(batch, held), nil
		} else {
			select {
			case m, ok := <-claim.Messages():
				if !ok {
					return nil
				}
				batch = append(batch, c.newItem(m))
			case <-sess.Context().Done():
				return nil
			}
		}
		ids := map[uuid.UUID]bool{}
		if id := batch[0].cmd.EventID; id != uuid.Nil {
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
				// is answered, so the repeat is answered from the ledger. The envelope's
				// event_id counts, not an event_id header: the ledger deduplicates on it.
				it := c.newItem(m)
				if id := it.cmd.EventID; id != uuid.Nil {
					if ids[id] {
						held = it
						break fill
					}
					ids[id] = true
				}
				batch = append(batch, it)
			default:
				break fill
			}
		}
		if !c.processBatch(sess.Context(), h.work, batch) {
			return nil // the session ended mid-batch: the rest is redelivered
		}
		sess.MarkMessage(batch[len(batch)-1].msg, "")
	}
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

	fp   []byte // fingerprint of the command (tenant, type, payload)
	twin *item  // an earlier record of the same command in the batch, which answers for both

	res      *domain.AdminResult // the answer, when there is one
	reply    OutMessage          // the result record built for replyTo, within MaxResultBytes
	replyTo  *domain.AdminResult // the res reply was built for; nil: none built
	stored   bool                // res is the ledger's stored answer: publish only
	unstored bool                // res is not the ledger's to keep (refused before or without a claim of its own)
	kept     bool                // res was stored in the ledger by this batch
	done     bool                // answered (or given up for a busy claim)
}

// processBatch answers every record of batch. It reports false when the session ended before
// every record was answered; nothing of the batch is then marked.
func (c *Consumer) processBatch(sess, work context.Context, items []*item) bool {
	claimable := c.triage(items)
	if len(claimable) > 0 && !c.claimBatch(sess, work, claimable) {
		return false
	}
	c.runChains(sess, work, claimable)
	complete := c.releaseUnstarted(work, claimable)
	c.buildReplies(items)
	if !c.finishAll(sess, work, claimable) {
		return false
	}
	out, twinsDone := c.outgoingOf(work, items)
	if !c.publishResults(sess, work, out) {
		return false
	}
	return complete && twinsDone
}

// triage starts the clock of every item and answers those to claim and run: a record that is
// not a well-formed envelope is rejected at once, a repeat of an event id in the batch becomes
// the twin of its first.
func (c *Consumer) triage(items []*item) (claimable []*item) {
	byID := map[uuid.UUID]*item{}
	for _, it := range items {
		it.start = time.Now()
		switch first := byID[it.cmd.EventID]; {
		case it.decErr != nil:
			// Not a well-formed envelope: answered at once, nothing of it written.
			r := c.rejected(it.cmd, it.decErr)
			it.res, it.unstored, it.done = &r, true, true
		case first != nil:
			it.twin = first // ConsumeClaim keeps repeats apart; should one get here, it runs once
		default:
			it.fp = fingerprint(it.cmd)
			byID[it.cmd.EventID] = it
			claimable = append(claimable, it)
		}
	}
	return claimable
}

// runChains runs the claimed items and returns when every chain stopped.
func (c *Consumer) runChains(sess, work context.Context, claimable []*item) {
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
}

// releaseUnstarted gives up the fresh claims of the claimed items that never started, and
// reports whether every claimed item was answered.
func (c *Consumer) releaseUnstarted(work context.Context, claimable []*item) (complete bool) {
	complete = true
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
	return complete
}

// buildReplies builds the result record of every answered item whose result the ledger does not
// hold yet, or gives the item the small stand-in of a result too large to publish.
func (c *Consumer) buildReplies(items []*item) {
	for _, it := range items {
		// A result too large to publish is stored and published as its small stand-in.
		if it.done && it.res != nil && !it.stored {
			m := c.resultMessage(it.key, *it.res)
			if size := messageSize(m); size > c.cfg.MaxResultBytes {
				r := c.tooLarge(it.cmd, *it.res, size)
				it.res = &r
			} else {
				it.reply, it.replyTo = m, it.res // answer sends it unless finishAll changes res
			}
		}
	}
}

// outgoingOf answers the records to publish for the answered items, twins taking their first's
// answer, and logs and counts the results new to this batch. twinsDone is false when a twin's
// first was not answered.
func (c *Consumer) outgoingOf(work context.Context, items []*item) (out []*outgoing, twinsDone bool) {
	twinsDone = true
	for _, it := range items {
		if it.twin != nil && it.twin.done && it.twin.res != nil {
			it.res, it.stored, it.done = it.twin.res, true, true
		}
		if it.twin != nil && !it.done {
			twinsDone = false
		}
		if it.res == nil || !it.done {
			continue
		}
		if !it.stored && it.res.Status != domain.AdminSucceeded {
			c.log.InfoContext(work, "admin command "+it.res.Status, "event_id", it.res.CommandEventID, "event_type", it.res.EventType,
				"tenant_id", it.res.TenantID, "reason", it.res.Reason)
		}
		if !it.stored {
			c.observe(*it.res, it.start)
		}
		out = append(out, &outgoing{it: it, msg: c.answer(it)})
	}
	return out, twinsDone
}

// answer is the result record of it, within Config.MaxResultBytes: a result too large (one
// stored before the limit was lowered) gives way to its small stand-in, and a record key too
// large to answer under is cut to MaxEnvelopeString bytes.
func (c *Consumer) answer(it *item) OutMessage {
	if it.replyTo == it.res {
		return it.reply
	}
	m := c.resultMessage(it.key, *it.res)
	size := messageSize(m)
	if size <= c.cfg.MaxResultBytes {
		return m
	}
	res := *it.res
	if res.Reason != ReasonResultTooLarge {
		res = c.tooLarge(it.cmd, res, size)
		if m = c.resultMessage(it.key, res); messageSize(m) <= c.cfg.MaxResultBytes {
			return m
		}
	}
	return c.resultMessage(shortKey(it.key), res)
}

// finishAll stores the answers of items with one statement. A command whose claim another
// consumer took over meanwhile is not answered with this run's result: it waits for the stored
// one (or runs again if the other gave it up), so every record of a command gets the same
// answer. It reports false when the session ended first.
func (c *Consumer) finishAll(sess, work context.Context, items []*item) bool {
	for {
		var finish []*item
		for _, it := range items {
			if it.done && it.res != nil && !it.stored && !it.unstored && !it.kept {
				finish = append(finish, it)
			}
		}
		if len(finish) == 0 {
			return true
		}
		var lost map[uuid.UUID]bool
		for attempt := 0; ; attempt++ {
			var err error
			if lost, err = c.ledger.finishBatch(work, finish); err == nil {
				break
			}
			c.log.WarnContext(work, "admin: store the answers of a batch", "commands", len(finish), "attempt", attempt+1, "err", err)
			if !c.sleep(work, c.backoff(attempt)) {
				return false
			}
		}
		var again []*item
		for _, it := range finish {
			if lost[it.cmd.EventID] {
				c.log.WarnContext(work, "admin command was taken over by another consumer; its stored answer is published",
					"event_id", it.cmd.EventID.String())
				it.res, it.done, it.fresh = nil, false, false
				again = append(again, it)
			} else {
				it.kept = true
			}
		}
		if len(again) == 0 {
			return true
		}
		for _, it := range again {
			if !c.runItem(sess, work, it) {
				return false
			}
		}
		items = again
	}
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
	r := domain.AdminResult{TenantID: echo(cmd.TenantID), EventType: echo(cmd.EventType), TraceID: echo(cmd.TraceID), Status: status,
		Reason: reason, Details: details, ConsumerGroup: c.cfg.ConsumerGroup, SourceService: domain.SourceService,
		OccurredAt: time.Now().UTC()}
	if cmd.EventID != uuid.Nil {
		r.CommandEventID = cmd.EventID.String()
	}
	if cmd.ParentEventID != nil {
		r.ParentEventID = cmd.ParentEventID.String()
	}
	if a := cmd.Actor; (a.Type == domain.ActorAdmin || a.Type == domain.ActorSystem) && actorIDRe.MatchString(a.ID) {
		r.Actor = &a // the verified actor (or an unsigned one the consumer accepts); refused records have none
	}
	if data != nil {
		if b, err := json.Marshal(data); err == nil {
			r.Result = b
		}
	}
	return r
}

// resultMessage is the record of res on the result topic under the command's key.
func (c *Consumer) resultMessage(key string, res domain.AdminResult) OutMessage {
	body, err := json.Marshal(res)
	if err != nil { // a result is strings, a time and marshalled JSON: this does not happen
		body, _ = json.Marshal(c.result(domain.AdminCommand{}, domain.AdminFailed, ReasonPermanentFailure, nil, nil))
	}
	headers := map[string]string{"command_event_id": res.CommandEventID, "event_type": res.EventType,
		"tenant_id": res.TenantID, "status": res.Status}
	return OutMessage{Topic: c.cfg.ResultTopic, Key: key, Value: body, Headers: headers}
}

func (c *Consumer) observe(res domain.AdminResult, start time.Time) {
	typ := res.EventType
	if _, ok := domain.LookupAdminCommand(domain.AdminCommandType(typ)); !ok {
		typ = "unknown"
	}
	c.metrics.commands.WithLabelValues(typ, res.Status).Inc()
	c.metrics.duration.WithLabelValues(typ).Observe(time.Since(start).Seconds())
}
