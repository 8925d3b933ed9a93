package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// RejectJoin asks to turn down User's pending join request.
type RejectJoin struct {
	Actor domain.Principal
	Group domain.GroupID
	User  domain.UserID // the requester
	Meta  Meta
}

// RejectJoinHandler handles RejectJoin.
type RejectJoinHandler struct{ c *core }

// Handle appends member.join_rejected.v1. Owner and admins only; a concurrent change of the
// request or of the actor's membership is a *ConflictError. Errors: domain.ErrNotFound;
// *domain.DeniedError group_dissolved, not_member, not_admin, no_pending_request;
// domain.ErrConcurrency; domain.ErrRetryable.
func (h RejectJoinHandler) Handle(ctx context.Context, cmd RejectJoin) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	if err := checkUser("user_id", cmd.User); err != nil {
		return Result{}, err
	}
	s := spec{op: "reject join", actor: cmd.Actor, meta: cmd.Meta}
	return h.c.execute(ctx, s, h.c.onMember(cmd.Actor, cmd.Group, cmd.User, true,
		func(g domain.GroupState, actor, target domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.RejectJoin(cmd.Actor, actor, target, now)
		}))
}
