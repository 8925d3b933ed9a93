package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/domain"
)

// envelope is a decoded event with where it was consumed from.
type envelope struct {
	domain.Envelope
	src     source
	payload []byte // the record value as consumed
}

func (e *envelope) key() convKey {
	return convKey{tenant: e.TenantID.String(), conv: domain.ConversationKey(e.StreamID)}
}

func (e envelope) parked() parkedEvent {
	return parkedEvent{EventID: e.EventID.String(), EventType: string(e.EventType), Topic: e.src.Topic,
		Partition: e.src.Partition, Offset: e.src.Offset, Payload: e.payload}
}

// runner drives one projection: the watermill handler function and the batch writer.
type runner struct {
	p       Projection
	parking parkingStore
	metrics *Metrics
	log     *slog.Logger
	batch   *batcher
	opened  openWatch // whether the group holds any open dead letter

	batchEvents, flushTime prometheus.Observer
}

func newRunner(p Projection, cfg Config, parking parkingStore, m *Metrics, log *slog.Logger) *runner {
	r := &runner{p: p, parking: parking, metrics: m, log: log.With("consumer_group", p.ConsumerGroup),
		batchEvents: m.batchEvents.WithLabelValues(p.ConsumerGroup), flushTime: m.flushTime.WithLabelValues(p.ConsumerGroup)}
	r.batch = newBatcher(cfg.Batch.MaxEvents, cfg.Batch.Flushers, cfg.Batch.Linger, r.flush)
	retries := m.retries.WithLabelValues(p.ConsumerGroup)
	r.batch.retried = retries.Inc
	rc := cfg.Retry
	r.batch.backoff = func(attempt int) time.Duration {
		d := float64(rc.InitialInterval)
		for range attempt {
			d *= rc.Multiplier
			if d >= float64(rc.MaxInterval) {
				return rc.MaxInterval
			}
		}
		return time.Duration(d)
	}
	return r
}

// handle is the watermill handler: decode, skip events the projection does not want, then
// wait for the event's batch. On failure it leaves the dead-letter reason in the metadata.
func (r *runner) handle(msg *message.Message) error {
	delete(msg.Metadata, metaPoisonReason)
	err := r.handleEvent(msg)
	if err != nil {
		reason, _ := classify(err)
		msg.Metadata.Set(metaPoisonReason, reason)
	}
	return err
}

func (r *runner) handleEvent(msg *message.Message) error {
	// The envelope (some 300 bytes) stays where prepareRecord put it, on the heap, until the
	// batch item copies it there: a copy in this frame grew the stack of every handler goroutine
	// (watermill starts one per record) past its first size, and copying the stack cost more
	// than the rest of the handler.
	ctx := msg.Context()
	d, ok := Prepared(ctx).(*decodedRecord)
	if !ok {
		d = prepareRecord(msg).(*decodedRecord)
	}
	if err := d.err; err != nil {
		// Hold the conversation's later events until this record is dead-lettered (the sink
		// names the conversation the same way).
		tenant, conv := conversationOf(msg, nil)
		r.batch.block(convKey{tenant: tenant, conv: conv}, sourceOf(msg))
		HandedOver(ctx)
		return err
	}
	_, known := domain.LookupEventType(d.env.EventType)
	if known && !r.p.Accept(d.env.EventType) {
		HandedOver(ctx)
		return nil
	}
	it := new(batchItem) // filled field by field: a composite literal is built in this frame first
	it.env.Envelope = d.env
	it.env.src, it.env.payload = sourceOf(msg), msg.Payload
	if !known {
		// It fails in its turn, not at once: the conversation's earlier events in flight are
		// applied first, and in a parked conversation it is parked behind the dead letter.
		it.refused = unknownEventType(&d.env)
	}
	return r.batch.submitItem(ctx, it, func() { HandedOver(ctx) })
}

// unknownEventType is the error of an event whose type this build does not know (kept out of
// handleEvent's frame).
func unknownEventType(env *domain.Envelope) error {
	return permanent(ReasonUnknownEventType, fmt.Errorf("event %s: unknown event type %q", env.EventID, env.EventType))
}

// decodedRecord is a record's envelope decoded by the subscriber (see prepareRecord).
type decodedRecord struct {
	env domain.Envelope
	err error
}

// prepareRecord decodes a record's envelope in the subscriber's partition goroutine. Not inlined:
// its envelope temporaries would sit in the frame of handleEvent, which calls it when a record
// was not prepared (see handleEvent).
//
//go:noinline
func prepareRecord(msg *message.Message) any {
	env, err := decodeEnvelope(msg.Payload)
	return &decodedRecord{env: env, err: err}
}

// settled tells the batcher that the record msg was dead-lettered, so the events of its
// conversation that wait behind it may go on (to be parked behind the dead letter).
func (r *runner) settled(msg *message.Message, tenant, conv string) {
	r.batch.resolve(convKey{tenant: tenant, conv: conv}, sourceOf(msg))
}

func (r *runner) observeFlush(events int, start time.Time) {
	r.batchEvents.Observe(float64(events))
	r.flushTime.Observe(time.Since(start).Seconds())
}

// flush writes one batch: events of parked conversations are parked, the rest are applied one
// tenant at a time. With a CheckedApplier the lookup of parked conversations in Postgres runs
// while the batch is written and the batch commits only if none of its conversations is parked;
// otherwise (and for other appliers) the lookup comes first. A batch that fails with a
// non-transient error is retried event by event, so one bad event fails only its own handler.
func (r *runner) flush(ctx context.Context, items []*batchItem) {
	defer r.observeFlush(len(items), time.Now())
	checked, ok := r.p.Applier.(CheckedApplier)
	if !ok {
		r.parkThenApply(ctx, items)
		return
	}
	check := r.startParkCheck(ctx, items)
	for _, g := range byTenant(items) {
		gate := func(ctx context.Context) error { return check.clear(ctx, g.items) }
		apply := func(ctx context.Context, events []domain.Envelope) (int, error) {
			return checked.ApplyIf(ctx, g.tenant, events, gate)
		}
		if !r.applyTenant(ctx, g.items, apply, gate) {
			// A conversation of the batch waits behind a dead letter: park what must wait and
			// apply the rest.
			r.parkThenApply(ctx, g.items)
		}
	}
}

// parkThenApply parks the items of parked conversations, then applies the rest one tenant at a
// time.
func (r *runner) parkThenApply(ctx context.Context, items []*batchItem) {
	apply, err := r.parkBatch(ctx, items)
	if err != nil {
		for _, it := range items {
			it.finish(err)
		}
		return
	}
	for _, g := range byTenant(apply) {
		r.applyTenant(ctx, g.items, func(ctx context.Context, events []domain.Envelope) (int, error) {
			return r.p.Applier.Apply(ctx, g.tenant, events)
		}, nil)
	}
}

// tenantItems are the items of one tenant, in batch order.
type tenantItems struct {
	tenant domain.TenantID
	items  []*batchItem
}

// byTenant groups items by tenant, tenants in order of first appearance.
func byTenant(items []*batchItem) []tenantItems {
	var out []tenantItems
	index := map[domain.TenantID]int{}
	for _, it := range items {
		t := it.env.TenantID
		i, ok := index[t]
		if !ok {
			i = len(out)
			index[t] = i
			out = append(out, tenantItems{tenant: t})
		}
		out[i].items = append(out[i].items, it)
	}
	return out
}

// errParked is a gate's refusal: a conversation of the batch has an open dead letter.
var errParked = errors.New("projections: a conversation of the batch is parked behind a dead letter")

// parkCheck is a lookup of the open dead letters of a batch's conversations, started before the
// batch is written and awaited before it commits.
type parkCheck struct {
	done chan struct{}
	open map[convKey]bool
	err  error
}

// startParkCheck starts looking up which conversations of items have an open dead letter.
func (r *runner) startParkCheck(ctx context.Context, items []*batchItem) *parkCheck {
	c := &parkCheck{done: make(chan struct{})}
	keys := conversations(items)
	go func() {
		defer close(c.done)
		if none, err := r.opened.none(ctx, r.parking, r.p.ConsumerGroup); none || err != nil {
			c.err = err
			return
		}
		c.open, c.err = r.parking.openConversations(ctx, r.p.ConsumerGroup, keys)
	}()
	return c
}

// clear waits for the lookup and fails with errParked if a conversation of items is parked, or
// with the lookup's error.
func (c *parkCheck) clear(ctx context.Context, items []*batchItem) error {
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if c.err != nil {
		return c.err
	}
	for _, it := range items {
		if c.open[it.env.key()] {
			return errParked
		}
	}
	return nil
}

// conversations returns the distinct conversations of items.
func conversations(items []*batchItem) []convKey {
	keys := make([]convKey, 0, len(items))
	seen := make(map[convKey]bool, len(items))
	for _, it := range items {
		if k := it.env.key(); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// parkBatch parks the items whose conversation has an open dead letter (answering them) and
// returns the items to apply.
func (r *runner) parkBatch(ctx context.Context, items []*batchItem) ([]*batchItem, error) {
	if none, err := r.opened.none(ctx, r.parking, r.p.ConsumerGroup); none || err != nil {
		return items, err
	}
	open, err := r.parking.openConversations(ctx, r.p.ConsumerGroup, conversations(items))
	if err != nil {
		return nil, err
	}
	if len(open) == 0 {
		return items, nil
	}
	apply := items[:0:0]
	for _, it := range items {
		k := it.env.key()
		if !open[k] {
			apply = append(apply, it)
			continue
		}
		outcome, err := r.parking.park(ctx, r.p.ConsumerGroup, k, it.env.parked())
		switch {
		case err != nil:
			it.finish(err)
		case outcome == notParked:
			apply = append(apply, it)
		default:
			if outcome == parked {
				r.metrics.parked.WithLabelValues(r.p.ConsumerGroup).Inc()
				r.log.Warn("event parked behind a dead letter", "tenant_id", k.tenant, "conversation", k.conv,
					"event_id", it.env.EventID.String(), "event_type", string(it.env.EventType))
			}
			it.finish(nil)
		}
	}
	return apply, nil
}

// applyTenant applies items, all of one tenant, as one batch with apply and answers each item.
// A batch that fails with a non-transient error (or panics), or holds a refused item, is applied
// again event by event; a refused item fails in its turn without being applied. gate, unless
// nil, is the batch's park check: when it refuses, applyTenant answers no item and returns false,
// and the caller parks what must wait.
func (r *runner) applyTenant(ctx context.Context, items []*batchItem, apply applyFunc, gate func(context.Context) error) bool {
	events := make([]domain.Envelope, len(items))
	for i, it := range items {
		events[i] = it.env.Envelope
	}
	var (
		n        int
		panicked any
	)
	err := refusal(items)
	if err == nil {
		n, panicked, err = r.safeApply(ctx, apply, events)
	}
	if err == nil && panicked == nil {
		r.applied(n, events)
		for _, it := range items {
			it.finish(nil)
		}
		return true
	}
	if panicked == nil && errors.Is(err, errParked) {
		return false
	}
	if panicked == nil && isTransient(err) {
		for _, it := range items {
			it.finish(err)
		}
		return true
	}
	// The batch may have failed before its park check was consulted: an event of a parked
	// conversation must be parked, not failed.
	if gate != nil {
		if gerr := gate(ctx); errors.Is(gerr, errParked) {
			return false
		} else if gerr != nil {
			for _, it := range items {
				it.finish(gerr)
			}
			return true
		}
	}
	if len(items) == 1 {
		items[0].setResult(result{err: err, panicked: panicked})
		return true
	}
	// Event by event, in order; once an event of a conversation fails, the conversation's later
	// events of the batch are left unanswered: they wait behind it (see batcher.settle).
	var failed map[convKey]bool
	for i, it := range items {
		if failed[it.key] {
			continue
		}
		n, err, panicked := 0, it.refused, any(nil)
		if err == nil {
			n, panicked, err = r.safeApply(ctx, apply, events[i:i+1])
		}
		if err == nil && panicked == nil {
			r.applied(n, events[i:i+1])
		} else {
			if failed == nil {
				failed = map[convKey]bool{}
			}
			failed[it.key] = true
		}
		it.setResult(result{err: err, panicked: panicked})
	}
	return true
}

// refusal returns the error of the first item that must fail without being applied, or nil.
func refusal(items []*batchItem) error {
	for _, it := range items {
		if it.refused != nil {
			return it.refused
		}
	}
	return nil
}

// safeApply calls apply and catches its panic.
func (r *runner) safeApply(ctx context.Context, apply applyFunc, events []domain.Envelope) (n int, panicked any, err error) {
	defer func() {
		if v := recover(); v != nil {
			panicked = v
		}
	}()
	n, err = apply(ctx, events)
	return n, nil, err
}

func (r *runner) applied(n int, events []domain.Envelope) {
	r.metrics.applied.WithLabelValues(r.p.ConsumerGroup).Add(float64(n))
	var newest time.Time
	for _, e := range events {
		if e.OccurredAt.After(newest) {
			newest = e.OccurredAt
		}
	}
	r.metrics.observeApplied(r.p.ConsumerGroup, newest)
}

// applyFunc writes a batch of one tenant's events and returns how many were new.
type applyFunc func(ctx context.Context, events []domain.Envelope) (int, error)
