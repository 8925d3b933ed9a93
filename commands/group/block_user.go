package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// BlockUser makes the actor block Peer: Peer can no longer send to the actor.
type BlockUser struct {
	Actor domain.Principal
	Peer  domain.UserID
	Meta  Meta
}

// BlockUserHandler handles BlockUser.
type BlockUserHandler struct{ c *core }

// Handle appends relation.blocked.v1 and drops pending friend requests between the two. The
// send path of this node refuses Peer's messages to the actor (blocked) from the moment Handle
// returns. Errors: *domain.DeniedError already_blocked; *domain.ValidationError for a bad peer;
// ErrUnknownUser (domain.ErrNotFound) when Peer does not exist in the tenant;
// domain.ErrConcurrency; domain.ErrRetryable.
func (h BlockUserHandler) Handle(ctx context.Context, cmd BlockUser) (Result, error) {
	s, err := relationSpec("block user", cmd.Actor, cmd.Peer, cmd.Meta)
	if err != nil {
		return Result{}, err
	}
	if err := h.c.requireUser(ctx, s.op, cmd.Actor.Tenant, "peer", cmd.Peer); err != nil {
		return Result{}, err
	}
	return h.c.execute(ctx, s, h.c.onRelation(cmd.Actor, cmd.Peer,
		func(r domain.RelationState, now time.Time) ([]domain.PendingEvent, error) {
			return r.Block(cmd.Actor, now)
		}))
}
