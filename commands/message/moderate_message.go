package message

import (
	"context"

	"github.com/imledger/imledger/domain"
)

// ModerationRecall recalls any message of a conversation by moderation: an administrator acts,
// not the sender, so neither the sender check nor the recall window applies, and the reason is
// recorded in the event.
type ModerationRecall struct {
	Tenant domain.TenantID
	Topic  domain.Topic
	Seq    int64
	// Moderator is who recalls, the event's actor: {admin, <id>}. Required.
	Moderator domain.Actor
	// Reason is recorded in the event; 1..domain.MaxReasonLen characters.
	Reason      string
	TraceID     string
	CausationID string
}

// RecallByModerator appends message.{group,direct}.recalled.v1 with no sender, the moderator and
// the reason; from then on every read model shows the message without content, as after a
// sender's recall. Errors: *domain.ValidationError for bad input, domain.ErrNotFound for an
// unknown seq, *domain.DeniedError already_recalled, domain.ErrConcurrency when another operation
// on the message won the race, retryable errors from the store.
func (h *MessageOpsHandler) RecallByModerator(ctx context.Context, cmd ModerationRecall) (RecallResult, error) {
	switch {
	case cmd.Tenant.IsZero():
		return RecallResult{}, invalidField("tenant_id", "required", "")
	case cmd.Topic.IsZero():
		return RecallResult{}, invalidField("topic", "required", "")
	case cmd.Seq <= 0:
		return RecallResult{}, invalidField("seq", "bad_format", "a positive seq")
	case cmd.Moderator.ID == "" || cmd.Moderator.Type == "":
		return RecallResult{}, invalidField("actor", "required", "")
	}
	if err := domain.CheckReason(cmd.Reason, true); err != nil {
		return RecallResult{}, err
	}
	st, err := loadMessage(ctx, h.store, cmd.Tenant, cmd.Topic, cmd.Seq)
	if err != nil {
		return RecallResult{}, err
	}
	if st.recalled {
		return RecallResult{}, domain.Deny(ReasonAlreadyRecalled)
	}
	now := h.now()
	payload := domain.MessageRecalled{Topic: cmd.Topic.String(), Seq: cmd.Seq, MessageID: st.sent.MessageID,
		Moderator: cmd.Moderator.ID, Reason: cmd.Reason, RecalledAt: now}
	return h.commitRecall(ctx, cmd.Tenant, cmd.Topic, st, payload, cmd.Moderator, func(e *domain.Envelope) {
		e.TraceID, e.CausationID = cmd.TraceID, cmd.CausationID
	})
}
