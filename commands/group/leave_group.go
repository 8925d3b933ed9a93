package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// LeaveGroup asks for the actor to leave a group.
type LeaveGroup struct {
	Actor domain.Principal
	Group domain.GroupID
	Meta  Meta
}

// LeaveGroupHandler handles LeaveGroup.
type LeaveGroupHandler struct{ c *core }

// Handle appends member.left.v1 and the member count change in one transaction; the Notifier
// hears ChangeLeft so the user's subscription is dropped. Errors: domain.ErrNotFound;
// *domain.DeniedError group_dissolved, not_member, owner_cannot_leave; domain.ErrConcurrency;
// domain.ErrRetryable.
func (h LeaveGroupHandler) Handle(ctx context.Context, cmd LeaveGroup) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	s := spec{op: "leave group", actor: cmd.Actor, meta: cmd.Meta, lock: domain.GroupStreamID(cmd.Group), serial: true}
	return h.c.execute(ctx, s, h.c.onSelf(cmd.Actor, cmd.Group,
		func(g domain.GroupState, m domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.Leave(cmd.Actor, m, now)
		}))
}
