package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
)

// Horizons tells a tenant's retention horizon (tenant.retention_applied.v1): its message history
// from before it left the read models, so projections and rebuilds read the message events that
// occurred before it as expired. Zero: the tenant keeps everything. The composition root passes
// the tenant registry (or its cache).
type Horizons interface {
	RetainedBefore(ctx context.Context, tenant domain.TenantID) (time.Time, error)
}

// SkipExpired is the reason of the seq_skipped event an expired sent message is read as.
const SkipExpired = "expired"

// expire returns events as read under horizon: a message event whose message was sent (or, for
// the others, which occurred) before horizon is expired. An expired sent message becomes the
// seq_skipped marker of its seq (reason SkipExpired, same envelope otherwise), so watermarks and
// seqs stay whole while its content, sender and head are gone — what the retention job leaves in
// the live read model (msgstore.Store.ExpireBefore). Expired recalls, edits and deletions for a
// user are dropped; read marks and seq skips are kept, as they are not history. Other events pass
// unchanged. A sent event that does not decode is passed on for the projector to judge.
func expire(events []domain.Envelope, horizon time.Time) []domain.Envelope {
	if horizon.IsZero() {
		return events
	}
	out := events[:0:0]
	for _, e := range events {
		if !isMessageEvent(e.EventType) {
			out = append(out, e)
			continue
		}
		if kept, ok := expireOne(e, horizon); ok {
			out = append(out, kept)
		}
	}
	return out
}

// expireOne reads one message event under horizon; ok false drops it.
func expireOne(e domain.Envelope, horizon time.Time) (domain.Envelope, bool) {
	info, _ := domain.LookupEventType(e.EventType)
	switch info.Type {
	case domain.EventGroupMessageSent, domain.EventDirectMessageSent:
		var p domain.MessageSent
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return e, true
		}
		at := p.SentAt
		if at.IsZero() {
			at = e.OccurredAt
		}
		if !at.Before(horizon) {
			return e, true
		}
		marker, err := json.Marshal(domain.SeqSkipped{Topic: e.StreamID, Seq: e.StreamVersion, Reason: SkipExpired, SkippedAt: at})
		if err != nil {
			return e, true
		}
		kind := domain.TopicGroup
		if info.Type == domain.EventDirectMessageSent {
			kind = domain.TopicDirect
		}
		e.EventType, e.Version, e.Payload = domain.MessageEventType(kind, domain.ActionSeqSkipped), 1, marker
		return e, true
	case domain.EventGroupSeqSkipped, domain.EventDirectSeqSkipped,
		domain.MessageEventType(domain.TopicGroup, domain.ActionReadMarked), domain.MessageEventType(domain.TopicDirect, domain.ActionReadMarked):
		return e, true
	}
	return e, !e.OccurredAt.Before(horizon)
}

// expiringReader is an EventReader that reads the message events of each tenant as expire does
// under the tenant's horizon. A page whose events were all dropped is followed by the next one,
// so an empty page still means the end of the log.
type expiringReader struct {
	EventReader
	horizons Horizons
}

// ReadAll implements EventReader.
func (r expiringReader) ReadAll(ctx context.Context, f domain.EventFilter, after int64, limit int) ([]domain.Envelope, error) {
	for {
		page, err := r.EventReader.ReadAll(ctx, f, after, limit)
		if err != nil || len(page) == 0 {
			return page, err
		}
		out, err := expireByTenant(ctx, r.horizons, page)
		if err != nil {
			return nil, err
		}
		if len(out) > 0 {
			return out, nil
		}
		after = page[len(page)-1].Position
	}
}

// expireByTenant applies expire to events of any tenants, each under its tenant's horizon.
func expireByTenant(ctx context.Context, h Horizons, events []domain.Envelope) ([]domain.Envelope, error) {
	horizons := map[domain.TenantID]time.Time{}
	out := events[:0:0]
	for _, e := range events {
		hz, ok := horizons[e.TenantID]
		if !ok {
			var err error
			if hz, err = h.RetainedBefore(ctx, e.TenantID); err != nil {
				return nil, fmt.Errorf("retention horizon of tenant %s: %w", e.TenantID, err)
			}
			horizons[e.TenantID] = hz
		}
		out = append(out, expire([]domain.Envelope{e}, hz)...)
	}
	return out, nil
}

// expiringApplier is an Applier whose events are read as expire does under the tenant's
// horizon first: a message event the live projector receives late (a lagging relay, a consumer
// group started from the beginning) does not bring back history retention removed.
type expiringApplier struct {
	next     Applier
	horizons Horizons
}

var _ CheckedApplier = checkedExpiringApplier{}

func (a expiringApplier) events(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) ([]domain.Envelope, error) {
	hz, err := a.horizons.RetainedBefore(ctx, tenant)
	if err != nil {
		return nil, domain.Retryable("retention horizon", err)
	}
	return expire(events, hz), nil
}

// Apply implements Applier.
func (a expiringApplier) Apply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
	kept, err := a.events(ctx, tenant, events)
	if err != nil || len(kept) == 0 {
		return 0, err
	}
	return a.next.Apply(ctx, tenant, kept)
}

// checkedExpiringApplier is expiringApplier over a CheckedApplier.
type checkedExpiringApplier struct {
	expiringApplier
	next CheckedApplier
}

// ApplyIf implements CheckedApplier: a batch whose events all expired is still checked with ok.
func (a checkedExpiringApplier) ApplyIf(ctx context.Context, tenant domain.TenantID, events []domain.Envelope, ok func(context.Context) error) (int, error) {
	kept, err := a.events(ctx, tenant, events)
	if err != nil {
		return 0, err
	}
	if len(kept) == 0 {
		return 0, ok(ctx)
	}
	return a.next.ApplyIf(ctx, tenant, kept, ok)
}

// WithRetention returns p with its events read under each tenant's retention horizon (see
// expire) before they are applied; a nil h returns p as it is.
func WithRetention(p Projection, h Horizons) Projection {
	if h == nil {
		return p
	}
	plain := expiringApplier{next: p.Applier, horizons: h}
	if c, ok := p.Applier.(CheckedApplier); ok {
		p.Applier = checkedExpiringApplier{expiringApplier: plain, next: c}
	} else {
		p.Applier = plain
	}
	return p
}
