package message

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/domain"
)

// StreamStore is what the message-operation handlers need from the event store: optimistic
// appends and stream reads. *eventstore.Store satisfies it.
type StreamStore interface {
	Append(ctx context.Context, tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope) ([]domain.Envelope, error)
	ReadStream(ctx context.Context, tenant domain.TenantID, streamID string, afterVersion int64, limit int) ([]domain.Envelope, error)
	LastVersion(ctx context.Context, tenant domain.TenantID, streamID string) (int64, error)
}

// messageState is one message folded from its sent event and its operations stream.
type messageState struct {
	sent           domain.MessageSent
	opsVersion     int64 // version of the message's operations stream
	contentVersion int64 // 1 until the first edit
	recalled       bool
}

// loadMessage reads the sent event at seq from the conversation stream and folds the message's
// recalls and edits. A seq with no message (never sent, or a hole, seq-skip marker or not) is
// domain.ErrNotFound.
func loadMessage(ctx context.Context, store StreamStore, tenant domain.TenantID, topic domain.Topic, seq int64) (messageState, error) {
	if seq <= 0 {
		return messageState{}, invalidField("seq", "bad_format", "a positive seq")
	}
	evs, err := store.ReadStream(ctx, tenant, topic.String(), seq-1, 1)
	if err != nil {
		return messageState{}, retryable("read message", err)
	}
	if len(evs) == 0 || evs[0].StreamVersion != seq || evs[0].EventType != domain.SentEventType(topic.Kind()) {
		return messageState{}, fmt.Errorf("message %s/%d: %w", topic, seq, domain.ErrNotFound)
	}
	st := messageState{contentVersion: 1}
	if err := evs[0].Decode(&st.sent); err != nil {
		return messageState{}, fmt.Errorf("decode message %s/%d: %w", topic, seq, err)
	}
	ops, err := store.ReadStream(ctx, tenant, domain.MessageOpsStreamID(topic, seq), 0, 0)
	if err != nil {
		return messageState{}, retryable("read message operations", err)
	}
	for _, op := range ops {
		st.opsVersion = op.StreamVersion
		switch op.EventType {
		case domain.MessageEventType(topic.Kind(), domain.ActionRecalled):
			st.recalled = true
		case domain.MessageEventType(topic.Kind(), domain.ActionEdited):
			var e domain.MessageEdited
			if err := op.Decode(&e); err != nil {
				return messageState{}, fmt.Errorf("decode edit of %s/%d: %w", topic, seq, err)
			}
			st.contentVersion = e.EditVersion
		}
	}
	return st, nil
}

// MessageRef addresses one message of a conversation and who acts on it.
type MessageRef struct {
	Tenant  domain.TenantID
	Topic   domain.Topic
	Seq     int64
	Actor   domain.UserID
	TraceID string
}

func (r MessageRef) validate() error {
	switch {
	case r.Tenant.IsZero():
		return invalidField("tenant_id", "required", "")
	case r.Topic.IsZero():
		return invalidField("topic", "required", "")
	case r.Actor <= 0:
		return invalidField("user_id", "required", "")
	case r.Seq <= 0:
		return invalidField("seq", "bad_format", "a positive seq")
	case r.Topic.Kind() == domain.TopicDirect && !r.Topic.Has(r.Actor):
		return invalidField("topic", "not_party", "the user is not one of the two users of this 1:1 topic")
	case len(r.TraceID) > MaxTraceIDLen:
		return invalidField("trace_id", "too_long", fmt.Sprintf("at most %d bytes", MaxTraceIDLen))
	case !storableText(r.TraceID):
		return invalidField("trace_id", domain.ReasonBadText, "valid UTF-8 without U+0000")
	}
	return nil
}

// userActor returns the envelope actor for a user.
func userActor(u domain.UserID) domain.Actor {
	return domain.Actor{Type: domain.ActorUser, ID: u.String()}
}
