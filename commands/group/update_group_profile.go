package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// UpdateGroupProfile asks to replace a group's name, avatar and intro.
type UpdateGroupProfile struct {
	Actor   domain.Principal
	Group   domain.GroupID
	Profile domain.GroupProfile // the whole new profile; build it with domain.NewGroupProfile
	Meta    Meta
}

// UpdateGroupProfileHandler handles UpdateGroupProfile.
type UpdateGroupProfileHandler struct{ c *core }

// Handle appends group.profile_updated.v1; an unchanged profile writes nothing (Unchanged).
// Owner and admins only. Errors: domain.ErrNotFound for an unknown group; *domain.DeniedError
// group_dissolved, not_member, not_admin; *domain.ValidationError; domain.ErrConcurrency after
// Config.MaxAttempts lost races; domain.ErrRetryable when the store failed.
func (h UpdateGroupProfileHandler) Handle(ctx context.Context, cmd UpdateGroupProfile) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	s := spec{op: "update group profile", actor: cmd.Actor, meta: cmd.Meta, lock: domain.GroupStreamID(cmd.Group)}
	return h.c.execute(ctx, s, h.c.onSelf(cmd.Actor, cmd.Group,
		func(g domain.GroupState, m domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.UpdateProfile(cmd.Actor, m, cmd.Profile, now)
		}))
}
