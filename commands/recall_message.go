package commands

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
	err = h.appendOp(ctx, ref, domain.ActionRecalled, st.opsVersion, payload)
	if err != nil {
		return RecallResult{}, err
	}
	h.changed(ctx, CommittedChange{Tenant: ref.Tenant, Topic: ref.Topic, Seq: ref.Seq, MessageID: st.sent.MessageID,
		By: ref.Actor, What: ChangeRecall, At: now})
	return RecallResult{Seq: ref.Seq, MessageID: st.sent.MessageID, RecalledAt: now}, nil
}

// appendOp appends one operation event to the message's operations stream at expected version.
func (h *MessageOpsHandler) appendOp(ctx context.Context, ref MessageRef, action domain.MessageAction, expected int64, payload any) error {
	stream := domain.MessageOpsStreamID(ref.Topic, ref.Seq)
	return h.appendOne(ctx, ref.Tenant, stream, expected, domain.MessageEventType(ref.Topic.Kind(), action), ref.Actor, ref.TraceID, payload)
}

func (h *MessageOpsHandler) appendOne(ctx context.Context, tenant domain.TenantID, stream string, expected int64, typ domain.EventType, actor domain.UserID, traceID string, payload any) error {
	env, err := domain.NewEnvelope(tenant, stream, expected+1, typ, userActor(actor), payload)
	if err != nil {
		return err
	}
	env.TraceID = traceID
	if _, err := h.store.Append(ctx, tenant, stream, expected, []domain.Envelope{env}); err != nil {
		if errors.Is(err, domain.ErrConcurrency) || errors.Is(err, domain.ErrInvalid) {
			return err
		}
		return retryable("append "+string(typ), err)
	}
	return nil
}
