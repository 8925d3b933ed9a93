package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// UnblockUser lifts the actor's block of Peer.
type UnblockUser struct {
	Actor domain.Principal
	Peer  domain.UserID
	Meta  Meta
}

// UnblockUserHandler handles UnblockUser.
type UnblockUserHandler struct{ c *core }

// Handle appends relation.unblocked.v1. Errors: *domain.DeniedError not_blocked;
// *domain.ValidationError for a bad peer; domain.ErrConcurrency; domain.ErrRetryable.
func (h UnblockUserHandler) Handle(ctx context.Context, cmd UnblockUser) (Result, error) {
	s, err := relationSpec("unblock user", cmd.Actor, cmd.Peer, cmd.Meta)
	if err != nil {
		return Result{}, err
	}
	return h.c.execute(ctx, s, h.c.onRelation(cmd.Actor, cmd.Peer,
		func(r domain.RelationState, now time.Time) ([]domain.PendingEvent, error) {
			return r.Unblock(cmd.Actor, now)
		}))
}
