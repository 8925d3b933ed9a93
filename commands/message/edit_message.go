package message

import (
	"context"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
)

// EditMessage replaces a message's content. Version is the content version the editor saw
// (1 for a message never edited); the edit fails with domain.ErrConcurrency when the message has
// moved on since, so two editors never overwrite each other silently.
type EditMessage struct {
	MessageRef
	Version int64
	Content domain.Content
}

// EditResult is the outcome of an edit.
type EditResult struct {
	Seq       int64
	MessageID string
	Version   int64 // the content version after the edit
	EditedAt  time.Time
}

// Edit replaces the content of a message: only its sender may, within the edit window, never after
// a recall, and only while the send policy (MessageOpsDeps.Policy) lets them post to the topic.
// Content is checked as a send's is (domain.NewContent). Once the edit is committed the
// ChangeListener hears about it. Errors as for Recall, plus domain.ErrConcurrency for a stale
// Version and the policy's refusal (a *domain.DeniedError such as not_member or muted).
func (h *MessageOpsHandler) Edit(ctx context.Context, cmd EditMessage) (EditResult, error) {
	if err := cmd.validate(); err != nil {
		return EditResult{}, err
	}
	if cmd.Version <= 0 {
		return EditResult{}, invalidField("version", "required", "the content version being edited")
	}
	if cmd.Content.Size() == 0 {
		return EditResult{}, invalidField("content", "required", "")
	}
	if cmd.Content.StoredSize() > h.cfg.MaxContentBytes {
		return EditResult{}, invalidField("content", "too_large", fmt.Sprintf("at most %d bytes", h.cfg.MaxContentBytes))
	}
	st, err := loadMessage(ctx, h.store, cmd.Tenant, cmd.Topic, cmd.Seq)
	if err != nil {
		return EditResult{}, err
	}
	now := h.now()
	switch {
	case st.sent.From != cmd.Actor:
		return EditResult{}, domain.Deny(ReasonNotSender)
	case st.recalled:
		return EditResult{}, domain.Deny(ReasonAlreadyRecalled)
	case now.Sub(st.sent.SentAt) > h.cfg.EditWindow:
		return EditResult{}, domain.Deny(ReasonEditExpired)
	case cmd.Version != st.contentVersion:
		return EditResult{}, fmt.Errorf("edit %s/%d: message is at version %d, not %d: %w",
			cmd.Topic, cmd.Seq, st.contentVersion, cmd.Version, domain.ErrConcurrency)
	}
	if h.policy != nil {
		if err := h.policy.CanSend(ctx, cmd.Tenant, cmd.Actor, cmd.Topic); err != nil {
			return EditResult{}, err
		}
	}
	stored, err := domain.SealContentRaw(ctx, h.sealer, cmd.Tenant, cmd.Actor, now, cmd.Content.Raw())
	if err != nil {
		return EditResult{}, fmt.Errorf("edit %s/%d: %w", cmd.Topic, cmd.Seq, err)
	}
	payload := domain.MessageEdited{Topic: cmd.Topic.String(), Seq: cmd.Seq, MessageID: st.sent.MessageID,
		By: cmd.Actor, EditVersion: st.contentVersion + 1, Content: stored, EditedAt: now}
	if err := h.appendOp(ctx, cmd.MessageRef, domain.ActionEdited, st.opsVersion, payload); err != nil {
		return EditResult{}, err
	}
	h.changed(ctx, CommittedChange{Tenant: cmd.Tenant, Topic: cmd.Topic, Seq: cmd.Seq, MessageID: st.sent.MessageID,
		By: cmd.Actor, What: ChangeEdit, Version: payload.EditVersion, Content: cmd.Content.Raw(), At: now})
	return EditResult{Seq: cmd.Seq, MessageID: st.sent.MessageID, Version: payload.EditVersion, EditedAt: now}, nil
}
