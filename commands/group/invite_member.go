package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// InviteMember asks to invite User into Group.
type InviteMember struct {
	Actor domain.Principal
	Group domain.GroupID
	User  domain.UserID // the invitee
	Meta  Meta
}

// InviteMemberHandler handles InviteMember.
type InviteMemberHandler struct{ c *core }

// Handle appends member.invited.v1 to the invitee's membership stream (a pending invitation is
// renewed), allowed to the roles the group's WhoMayInvite setting names. Errors:
// domain.ErrNotFound (a group never created, or ErrUnknownUser: an invitee who does not exist in
// the tenant); *domain.DeniedError group_dissolved, not_member, not_admin, not_owner,
// already_member, banned; domain.ErrConcurrency; domain.ErrRetryable.
func (h InviteMemberHandler) Handle(ctx context.Context, cmd InviteMember) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	if err := checkUser("user_id", cmd.User); err != nil {
		return Result{}, err
	}
	s := spec{op: "invite member", actor: cmd.Actor, meta: cmd.Meta}
	if err := h.c.requireUser(ctx, s.op, cmd.Actor.Tenant, "user_id", cmd.User); err != nil {
		return Result{}, err
	}
	return h.c.execute(ctx, s, h.c.onMember(cmd.Actor, cmd.Group, cmd.User, false,
		func(g domain.GroupState, actor, target domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.Invite(cmd.Actor, actor, target, now)
		}))
}
