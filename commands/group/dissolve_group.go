package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// DissolveGroup asks to dissolve a group for good.
type DissolveGroup struct {
	Actor domain.Principal
	Group domain.GroupID
	Meta  Meta
}

// DissolveGroupHandler handles DissolveGroup.
type DissolveGroupHandler struct{ c *core }

// Handle appends group.dissolved.v1; from then on every command and every post to the group is
// refused group_dissolved, and the Notifier hears ChangeDissolved so every subscription to the
// topic is dropped. Owner only. Errors: domain.ErrNotFound; *domain.DeniedError group_dissolved,
// not_member, not_owner; domain.ErrConcurrency; domain.ErrRetryable.
func (h DissolveGroupHandler) Handle(ctx context.Context, cmd DissolveGroup) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	s := spec{op: "dissolve group", actor: cmd.Actor, meta: cmd.Meta, lock: domain.GroupStreamID(cmd.Group)}
	return h.c.execute(ctx, s, h.c.onSelf(cmd.Actor, cmd.Group,
		func(g domain.GroupState, m domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.Dissolve(cmd.Actor, m, now)
		}))
}
