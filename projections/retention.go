package projections

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
)

// Horizons tells a tenant's retention horizon (tenant.retention_applied.v1): its message history
// from before it left the read models, so projections and rebuilds read the message events that
// occurred before it as expired. Zero: the tenant keeps everything. The composition root passes
// the tenant registry (or its cache).
type Horizons interface {
	RetainedBefore(ctx context.Context, tenant domain.TenantID) (time.Time, error)
}

// expire returns events as read under horizon: a message event whose message was sent (or, for
// the others, which occurred) before horizon is expired. An expired sent message becomes the
// seq_skipped marker of its seq (reason domain.SkipExpired, same envelope otherwise) followed by
// the read marks its send implied, so watermarks, seqs and read marks stay whole while its
// content, sender and head are gone — what the retention job leaves in the live read models
// (msgstore.Store.ExpireBefore, hot.Store.ExpireBefore). Expired recalls, edits and deletions
// for a user are dropped; read marks and seq skips are kept, as they are not history. Other
// events pass unchanged. A sent event that does not decode is passed on for the projector to
// judge.
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
		out = append(out, expireOne(e, horizon)...)
	}
	return out
}

// expireOne reads one message event under horizon.
func expireOne(e domain.Envelope, horizon time.Time) []domain.Envelope {
	info, _ := domain.LookupEventType(e.EventType)
	switch info.Type {
	case domain.EventGroupMessageSent, domain.EventDirectMessageSent:
		var p domain.MessageSent
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return []domain.Envelope{e}
		}
		at := p.SentAt
		if at.IsZero() {
			at = e.OccurredAt
		}
		if !at.Before(horizon) {
			return []domain.Envelope{e}
		}
		topic, err := domain.ParseTopic(e.StreamID)
		if err != nil {
			return []domain.Envelope{e}
		}
		out := []domain.Envelope{expiredMarker(e, topic, e.StreamVersion, at)}
		out = append(out, derived(readMark(e, topic, p.From, e.StreamVersion, at), "read/sender"))
		if topic.Kind() == domain.TopicDirect {
			out = append(out, derived(readMark(e, topic, topic.Peer(p.From), 0, at), "read/peer"))
		}
		return out
	case domain.EventGroupSeqSkipped, domain.EventDirectSeqSkipped,
		domain.MessageEventType(domain.TopicGroup, domain.ActionReadMarked), domain.MessageEventType(domain.TopicDirect, domain.ActionReadMarked):
		return []domain.Envelope{e}
	}
	if e.OccurredAt.Before(horizon) {
		return nil
	}
	return []domain.Envelope{e}
}

// expiredMarker is e read as the expired seq_skipped marker of seq of topic, given up at at.
func expiredMarker(e domain.Envelope, topic domain.Topic, seq int64, at time.Time) domain.Envelope {
	p, _ := json.Marshal(domain.SeqSkipped{Topic: topic.String(), Seq: seq, Reason: domain.SkipExpired, SkippedAt: at})
	e.EventType, e.Version, e.Payload = domain.MessageEventType(topic.Kind(), domain.ActionSeqSkipped), 1, p
	e.StreamID, e.StreamVersion = topic.String(), seq
	return e
}

// derived gives e, an event expire derived from another, an id of its own (stable: from the
// original id and what), since readers tell events apart by id.
func derived(e domain.Envelope, what string) domain.Envelope {
	e.EventID = uuid.NewSHA1(e.EventID, []byte("expired/"+what))
	return e
}

// readMark is e read as the read mark (read and receive seq) of user in topic at at.
func readMark(e domain.Envelope, topic domain.Topic, user domain.UserID, seq int64, at time.Time) domain.Envelope {
	p, _ := json.Marshal(domain.ReadMarked{Topic: topic.String(), User: user, ReadSeq: seq, RecvSeq: seq, At: at})
	e.EventType, e.Version, e.Payload = domain.MessageEventType(topic.Kind(), domain.ActionReadMarked), 1, p
	return e
}

// Expire returns events as read under horizon, as the live projections read them (see expire):
// readers of the log (replay.ExpiringEvents) rebuild what the live read models hold.
func Expire(events []domain.Envelope, horizon time.Time) []domain.Envelope {
	return expire(events, horizon)
}

// ExpiredBelow returns the expired markers of seqs 1..v-1 of the conversation of e, a seq event at
// version v, given up just before horizon: what a pass over the log from its start reads in place
// of a conversation's events that were dropped with their month partition (the live read model
// keeps them as markers). It returns none for an event of no topic or at version 1.
func ExpiredBelow(e domain.Envelope, horizon time.Time) []domain.Envelope {
	topic, err := domain.ParseTopic(e.StreamID)
	if err != nil || e.StreamVersion <= 1 {
		return nil
	}
	out := make([]domain.Envelope, 0, e.StreamVersion-1)
	for seq := int64(1); seq < e.StreamVersion; seq++ {
		out = append(out, derived(expiredMarker(e, topic, seq, horizon.Add(-time.Millisecond)), "seq/"+strconv.FormatInt(seq, 10)))
	}
	return out
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
