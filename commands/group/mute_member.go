package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// MuteMember asks to keep User from posting in Group until Until.
type MuteMember struct {
	Actor domain.Principal
	Group domain.GroupID
	User  domain.UserID
	Until time.Time // required, after now; UnmuteMember lifts a mute
	Meta  Meta
}

// MuteMemberHandler handles MuteMember.
type MuteMemberHandler struct{ c *core }

// Handle appends member.muted.v1. The owner mutes anyone else, an admin plain members only. The
// mute ends by itself at Until: the send path compares it with the clock. Errors:
// domain.ErrNotFound; *domain.DeniedError group_dissolved, not_member, not_admin, self_action,
// target_not_member, cannot_mute_owner, cannot_mute_admin; *domain.ValidationError for a zero or
// past Until; a *ConflictError when either membership changed concurrently; domain.ErrRetryable.
func (h MuteMemberHandler) Handle(ctx context.Context, cmd MuteMember) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	if err := checkUser("user_id", cmd.User); err != nil {
		return Result{}, err
	}
	if cmd.Until.IsZero() {
		return Result{}, &domain.ValidationError{Field: "until", Reason: "required", Detail: "use unmute to lift a mute"}
	}
	s := spec{op: "mute member", actor: cmd.Actor, meta: cmd.Meta}
	return h.c.execute(ctx, s, h.c.onMember(cmd.Actor, cmd.Group, cmd.User, true,
		func(g domain.GroupState, actor, target domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.Mute(cmd.Actor, actor, target, cmd.Until, now)
		}))
}
