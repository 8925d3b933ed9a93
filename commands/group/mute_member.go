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

// maxUntilYear is the last year, in UTC, a mute may end in: the events' JSON carries no later time.
const maxUntilYear = 9999

// MuteMemberHandler handles MuteMember.
type MuteMemberHandler struct{ c *core }

// Handle appends member.muted.v1. The owner mutes anyone else, an admin plain members only. The
// mute ends by itself at Until: the send path compares it with the clock. Errors:
// domain.ErrNotFound; *domain.DeniedError group_dissolved, not_member, not_admin, self_action,
// target_not_member, cannot_mute_owner, cannot_mute_admin; *domain.ValidationError for a zero or
// past Until, or one after the year 9999 in UTC; a *ConflictError when either membership changed
// concurrently; domain.ErrRetryable.
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
	if cmd.Until.UTC().Year() > maxUntilYear {
		return Result{}, &domain.ValidationError{Field: "until", Reason: "bad_value", Detail: "at most 9999-12-31T23:59:59Z"}
	}
	s := spec{op: "mute member", actor: cmd.Actor, meta: cmd.Meta}
	return h.c.execute(ctx, s, h.c.onMember(cmd.Actor, cmd.Group, cmd.User, true,
		func(g domain.GroupState, actor, target domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.Mute(cmd.Actor, actor, target, cmd.Until, now)
		}))
}
