package projections

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/imledger/imledger/domain"
)

// envelope is a decoded event with where it was consumed from.
type envelope struct {
	domain.Envelope
	src     source
	payload []byte // the record value as consumed
}

func (e envelope) key() convKey {
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
}

func newRunner(p Projection, cfg Config, parking parkingStore, m *Metrics, log *slog.Logger) *runner {
	r := &runner{p: p, parking: parking, metrics: m, log: log.With("consumer_group", p.ConsumerGroup)}
	r.batch = newBatcher(cfg.Batch.MaxEvents, cfg.Batch.Flushers, r.flush)
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
	env, err := decodeEnvelope(msg.Payload)
	if err != nil {
		return err
	}
	if _, known := domain.LookupEventType(env.EventType); !known {
		return permanent(ReasonUnknownEventType, fmt.Errorf("event %s: unknown event type %q", env.EventID, env.EventType))
	}
	if !r.p.Accept(env.EventType) {
		return nil
	}
	return r.batch.submit(msg.Context(), envelope{Envelope: env, src: sourceOf(msg), payload: msg.Payload})
}

// flush writes one batch: events of parked conversations are parked, the rest are applied one
// tenant at a time. A batch that fails with a non-transient error is retried event by event,
// so one bad event fails only its own handler.
func (r *runner) flush(ctx context.Context, items []*batchItem) {
	apply, err := r.parkBatch(ctx, items)
	if err != nil {
		for _, it := range items {
			it.finish(err)
		}
		return
	}
	var order []domain.TenantID
	byTenant := map[domain.TenantID][]*batchItem{}
	for _, it := range apply {
		t := it.env.TenantID
		if _, ok := byTenant[t]; !ok {
			order = append(order, t)
		}
		byTenant[t] = append(byTenant[t], it)
	}
	for _, t := range order {
		r.applyTenant(ctx, t, byTenant[t])
	}
}

// parkBatch parks the items whose conversation has an open dead letter (answering them) and
// returns the items to apply.
func (r *runner) parkBatch(ctx context.Context, items []*batchItem) ([]*batchItem, error) {
	keys := make([]convKey, 0, len(items))
	seen := make(map[convKey]bool, len(items))
	for _, it := range items {
		if k := it.env.key(); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	open, err := r.parking.openConversations(ctx, r.p.ConsumerGroup, keys)
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

func (r *runner) applyTenant(ctx context.Context, tenant domain.TenantID, items []*batchItem) {
	events := make([]domain.Envelope, len(items))
	for i, it := range items {
		events[i] = it.env.Envelope
	}
	n, err, panicked := r.safeApply(ctx, tenant, events)
	if err == nil && panicked == nil {
		r.applied(n, events)
		for _, it := range items {
			it.finish(nil)
		}
		return
	}
	if len(items) == 1 || panicked == nil && isTransient(err) {
		for _, it := range items {
			it.done <- result{err: err, panicked: panicked}
		}
		return
	}
	for i, it := range items {
		n, err, panicked := r.safeApply(ctx, tenant, events[i:i+1])
		if err == nil && panicked == nil {
			r.applied(n, events[i:i+1])
		}
		it.done <- result{err: err, panicked: panicked}
	}
}

// safeApply calls the applier and catches its panic.
func (r *runner) safeApply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (n int, err error, panicked any) {
	defer func() {
		if v := recover(); v != nil {
			panicked = v
		}
	}()
	n, err = r.p.Applier.Apply(ctx, tenant, events)
	return n, err, nil
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
