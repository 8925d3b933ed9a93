package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// UnbanMember asks to lift the ban of a removed user.
type UnbanMember struct {
	Actor domain.Principal
	Group domain.GroupID
	User  domain.UserID
	Meta  Meta
}

// UnbanMemberHandler handles UnbanMember.
type UnbanMemberHandler struct{ c *core }

// Handle appends member.unbanned.v1. Owner and admins only. Errors: domain.ErrNotFound;
// *domain.DeniedError group_dissolved, not_member, not_admin, not_banned; a *ConflictError when
// the target's or the actor's membership changed concurrently; domain.ErrRetryable.
func (h UnbanMemberHandler) Handle(ctx context.Context, cmd UnbanMember) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	if err := checkUser("user_id", cmd.User); err != nil {
		return Result{}, err
	}
	s := spec{op: "unban member", actor: cmd.Actor, meta: cmd.Meta}
	return h.c.execute(ctx, s, h.c.onMember(cmd.Actor, cmd.Group, cmd.User, true,
		func(g domain.GroupState, actor, target domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.Unban(cmd.Actor, actor, target, now)
		}))
}
