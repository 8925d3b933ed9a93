package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// UnmuteMember asks to lift User's mute in Group.
type UnmuteMember struct {
	Actor domain.Principal
	Group domain.GroupID
	User  domain.UserID
	Meta  Meta
}

// UnmuteMemberHandler handles UnmuteMember.
type UnmuteMemberHandler struct{ c *core }

// Handle appends member.muted.v1 with a zero until; a mute not in force writes nothing
// (Unchanged). Errors as MuteMemberHandler.Handle.
func (h UnmuteMemberHandler) Handle(ctx context.Context, cmd UnmuteMember) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	if err := checkUser("user_id", cmd.User); err != nil {
		return Result{}, err
	}
	s := spec{op: "unmute member", actor: cmd.Actor, meta: cmd.Meta}
	return h.c.execute(ctx, s, h.c.onMember(cmd.Actor, cmd.Group, cmd.User, true,
		func(g domain.GroupState, actor, target domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.Mute(cmd.Actor, actor, target, time.Time{}, now)
		}))
}
