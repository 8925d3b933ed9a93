package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// UpdateGroupSettings asks to replace a group's rules: join approval, who may invite and
// announce, mute-all.
type UpdateGroupSettings struct {
	Actor    domain.Principal
	Group    domain.GroupID
	Settings domain.GroupSettings // the whole new settings; ignored when Edit is set
	// Edit, when set, derives the new settings from the group's current ones on every attempt
	// (turn mute-all on, keep the rest), so a change committed meanwhile is kept, not
	// overwritten with settings read before it.
	Edit func(domain.GroupSettings) domain.GroupSettings
	Meta Meta
}

// UpdateGroupSettingsHandler handles UpdateGroupSettings.
type UpdateGroupSettingsHandler struct{ c *core }

// Handle appends group.settings_updated.v1; unchanged settings write nothing (Unchanged). Owner
// and admins only. Turning mute-all on takes effect on the send path of this node at once and on
// other nodes as their caches are invalidated. Errors as UpdateGroupProfileHandler.Handle.
func (h UpdateGroupSettingsHandler) Handle(ctx context.Context, cmd UpdateGroupSettings) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	s := spec{op: "update group settings", actor: cmd.Actor, meta: cmd.Meta, lock: domain.GroupStreamID(cmd.Group)}
	return h.c.execute(ctx, s, h.c.onSelf(cmd.Actor, cmd.Group,
		func(g domain.GroupState, m domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			settings := cmd.Settings
			if cmd.Edit != nil {
				settings = cmd.Edit(g.Settings())
			}
			return g.UpdateSettings(cmd.Actor, m, settings, now)
		}))
}
