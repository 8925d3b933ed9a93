package message

import (
	"context"
	"errors"
	"time"

	"github.com/imledger/imledger/domain"
)

// DeleteResult is the outcome of a delete-for-me.
type DeleteResult struct {
	Seq       int64
	MessageID string
	DeletedAt time.Time
}

// DeleteForMe hides a message for the acting user only; everyone else still sees it. The message
// must exist. Deleting twice appends a second event, which read models treat as a no-op.
func (h *MessageOpsHandler) DeleteForMe(ctx context.Context, ref MessageRef) (DeleteResult, error) {
	if err := ref.validate(); err != nil {
		return DeleteResult{}, err
	}
	st, err := loadMessage(ctx, h.store, ref.Tenant, ref.Topic, ref.Seq)
	if err != nil {
		return DeleteResult{}, err
	}
	now := h.now()
	payload := domain.MessageDeletedForUser{Topic: ref.Topic.String(), Seq: ref.Seq, MessageID: st.sent.MessageID,
		User: ref.Actor, DeletedAt: now}
	stream := domain.DeletionsStreamID(ref.Topic, ref.Actor)
	typ := domain.MessageEventType(ref.Topic.Kind(), domain.ActionDeleted)
	err = h.withRetry(ctx, func() error {
		v, err := h.store.LastVersion(ctx, ref.Tenant, stream)
		if err != nil {
			return retryable("read deletions", err)
		}
		return h.appendOne(ctx, ref.Tenant, stream, v, typ, ref.Actor, ref.TraceID, payload)
	})
	if err != nil {
		return DeleteResult{}, err
	}
	return DeleteResult{Seq: ref.Seq, MessageID: st.sent.MessageID, DeletedAt: now}, nil
}

// withRetry runs fn again while it loses an optimistic-concurrency race, up to MaxAttempts.
func (h *MessageOpsHandler) withRetry(ctx context.Context, fn func() error) error {
	var err error
	for range h.cfg.MaxAttempts {
		if err = fn(); !errors.Is(err, domain.ErrConcurrency) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return err
}
