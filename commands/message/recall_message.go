package message

import (
	"context"
	"errors"
	"time"

	"github.com/imledger/imledger/domain"
)

// Stable refusal reasons of the message-operation commands.
const (
	ReasonNotSender       = "not_sender"
	ReasonRecallExpired   = "recall_window_passed"
	ReasonEditExpired     = "edit_window_passed"
	ReasonAlreadyRecalled = "already_recalled"
)

// RecallResult is the outcome of a recall.
type RecallResult struct {
	Seq        int64
	MessageID  string
	RecalledAt time.Time
}

// Recall withdraws a message: only its sender may, within the recall window, and only once. Once
// the recall is committed the ChangeListener hears about it.
// Errors: *domain.ValidationError for bad input, domain.ErrNotFound for an unknown seq,
// *domain.DeniedError (not_sender, recall_window_passed, already_recalled), domain.ErrConcurrency
// when another operation on the message won the race, retryable errors from the store.
func (h *MessageOpsHandler) Recall(ctx context.Context, ref MessageRef) (RecallResult, error) {
	if err := ref.validate(); err != nil {
		return RecallResult{}, err
	}
	st, err := loadMessage(ctx, h.store, ref.Tenant, ref.Topic, ref.Seq)
	if err != nil {
		return RecallResult{}, err
	}
	now := h.now()
	switch {
	case st.sent.From != ref.Actor:
		return RecallResult{}, domain.Deny(ReasonNotSender)
	case st.recalled:
		return RecallResult{}, domain.Deny(ReasonAlreadyRecalled)
	case now.Sub(st.sent.SentAt) > h.cfg.RecallWindow:
		return RecallResult{}, domain.Deny(ReasonRecallExpired)
	}
	payload := domain.MessageRecalled{Topic: ref.Topic.String(), Seq: ref.Seq, MessageID: st.sent.MessageID,
		By: ref.Actor, RecalledAt: now}
	return h.commitRecall(ctx, ref.Tenant, ref.Topic, st, payload, userActor(ref.Actor), func(e *domain.Envelope) { e.TraceID = ref.TraceID })
}

// commitRecall appends a recall decided by Recall or RecallByModerator: the one place a recall
// commits, whoever asked for it.
func (h *MessageOpsHandler) commitRecall(ctx context.Context, tenant domain.TenantID, topic domain.Topic, st messageState,
	payload domain.MessageRecalled, actor domain.Actor, meta func(*domain.Envelope)) (RecallResult, error) {
	stream := domain.MessageOpsStreamID(topic, payload.Seq)
	typ := domain.MessageEventType(topic.Kind(), domain.ActionRecalled)
	if err := h.appendAs(ctx, tenant, stream, st.opsVersion, typ, actor, meta, payload); err != nil {
		return RecallResult{}, err
	}
	h.changed(ctx, CommittedChange{Tenant: tenant, Topic: topic, Seq: payload.Seq, MessageID: st.sent.MessageID,
		By: payload.By, What: ChangeRecall, At: payload.RecalledAt})
	return RecallResult{Seq: payload.Seq, MessageID: st.sent.MessageID, RecalledAt: payload.RecalledAt}, nil
}

// appendOp appends one operation event to the message's operations stream at expected version.
func (h *MessageOpsHandler) appendOp(ctx context.Context, ref MessageRef, action domain.MessageAction, expected int64, payload any) error {
	stream := domain.MessageOpsStreamID(ref.Topic, ref.Seq)
	return h.appendOne(ctx, ref.Tenant, stream, expected, domain.MessageEventType(ref.Topic.Kind(), action), ref.Actor, ref.TraceID, payload)
}

func (h *MessageOpsHandler) appendOne(ctx context.Context, tenant domain.TenantID, stream string, expected int64, typ domain.EventType, actor domain.UserID, traceID string, payload any) error {
	return h.appendAs(ctx, tenant, stream, expected, typ, userActor(actor), func(e *domain.Envelope) { e.TraceID = traceID }, payload)
}

// appendAs appends one event caused by actor; meta completes the envelope (trace, causation).
func (h *MessageOpsHandler) appendAs(ctx context.Context, tenant domain.TenantID, stream string, expected int64, typ domain.EventType, actor domain.Actor, meta func(*domain.Envelope), payload any) error {
	env, err := domain.NewEnvelope(tenant, stream, expected+1, typ, actor, payload)
	if err != nil {
		return err
	}
	meta(&env)
	if _, err := h.store.Append(ctx, tenant, stream, expected, []domain.Envelope{env}); err != nil {
		if errors.Is(err, domain.ErrConcurrency) || errors.Is(err, domain.ErrInvalid) {
			return err
		}
		return retryable("append "+string(typ), err)
	}
	return nil
}
