package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// RemoveMember asks to remove User from Group, optionally banning them from coming back.
type RemoveMember struct {
	Actor domain.Principal
	Group domain.GroupID
	User  domain.UserID
	Ban   bool // the user may not join, request or be invited again until unbanned
	Meta  Meta
}

// RemoveMemberHandler handles RemoveMember.
type RemoveMemberHandler struct{ c *core }

// Handle appends member.removed.v1 and the member count change in one transaction; the Notifier
// hears ChangeRemoved so the user's subscription is dropped at once, and the send path of this
// node refuses the user from the moment Handle returns. The owner removes anyone else, an admin
// plain members only. When the target's or the actor's membership changes while the command
// runs (the target became owner, the actor was demoted) it fails with a *ConflictError, which
// wraps domain.ErrConcurrency. Errors: domain.ErrNotFound; *domain.DeniedError group_dissolved,
// not_member, not_admin, self_action, target_not_member, cannot_remove_owner, cannot_remove_admin;
// domain.ErrConcurrency; domain.ErrRetryable.
func (h RemoveMemberHandler) Handle(ctx context.Context, cmd RemoveMember) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	if err := checkUser("user_id", cmd.User); err != nil {
		return Result{}, err
	}
	s := spec{op: "remove member", actor: cmd.Actor, meta: cmd.Meta, lock: domain.GroupStreamID(cmd.Group)}
	return h.c.execute(ctx, s, h.c.onMember(cmd.Actor, cmd.Group, cmd.User, true,
		func(g domain.GroupState, actor, target domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.Remove(cmd.Actor, actor, target, cmd.Ban, now)
		}))
}
