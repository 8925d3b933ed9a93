package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// UpdateAnnouncement asks to set a group's announcement; empty text clears it.
type UpdateAnnouncement struct {
	Actor domain.Principal
	Group domain.GroupID
	Text  string
	Meta  Meta
}

// UpdateAnnouncementHandler handles UpdateAnnouncement.
type UpdateAnnouncementHandler struct{ c *core }

// Handle appends group.announcement_updated.v1, allowed to the roles the group's WhoMayAnnounce
// setting names and never to a muted member. Errors: domain.ErrNotFound; *domain.DeniedError
// group_dissolved, not_member, muted, not_admin, not_owner; *domain.ValidationError for text over
// domain.MaxAnnouncementLen characters; domain.ErrConcurrency; domain.ErrRetryable.
func (h UpdateAnnouncementHandler) Handle(ctx context.Context, cmd UpdateAnnouncement) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	s := spec{op: "update announcement", actor: cmd.Actor, meta: cmd.Meta, lock: domain.GroupStreamID(cmd.Group)}
	return h.c.execute(ctx, s, h.c.onSelf(cmd.Actor, cmd.Group,
		func(g domain.GroupState, m domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.UpdateAnnouncement(cmd.Actor, m, cmd.Text, now)
		}))
}
