package group

import (
	"context"
	"errors"

	"github.com/imledger/imledger/domain"
)

// CreateGroup asks to create a group with the actor as its owner and first member.
type CreateGroup struct {
	Actor domain.Principal
	// Group is the id to create; 0 draws one from the IDGenerator (the usual case).
	Group domain.GroupID
	// Profile is the group's name (required), avatar and intro; build it with domain.NewGroupProfile.
	Profile domain.GroupProfile
	// Settings are the group's rules; nil means domain.DefaultGroupSettings.
	Settings *domain.GroupSettings
	Meta     Meta
}

// CreateGroupHandler handles CreateGroup.
type CreateGroupHandler struct{ c *core }

// Handle creates the group: group.created.v1 on the group stream and the owner's member.joined.v1,
// in one transaction. Result.Group is the new id. A drawn id that is already taken is replaced by a
// new one, up to Config.MaxCreateAttempts draws. Errors: *domain.ValidationError for a missing name
// or bad settings; *domain.DeniedError group_exists when an explicit id is taken; domain.ErrRetryable
// when the store failed.
func (h CreateGroupHandler) Handle(ctx context.Context, cmd CreateGroup) (Result, error) {
	settings := domain.DefaultGroupSettings()
	if cmd.Settings != nil {
		settings = *cmd.Settings
	}
	for draw := 1; ; draw++ {
		id := cmd.Group
		if id == 0 {
			drawn, err := h.c.ids.NewGroupID(ctx)
			if err != nil {
				return Result{}, domain.Retryable("draw group id", err)
			}
			id = drawn
		}
		if err := checkGroup(id); err != nil {
			return Result{}, err
		}
		res, err := h.c.execute(ctx, spec{op: "create group", actor: cmd.Actor, meta: cmd.Meta},
			func(ctx context.Context) (decision, error) {
				g, err := h.c.group(ctx, cmd.Actor.Tenant, id)
				if err != nil {
					return decision{}, err
				}
				events, err := g.Create(cmd.Actor, cmd.Profile, settings, h.c.now())
				return groupDecision(id, events), err
			})
		var denied *domain.DeniedError
		if cmd.Group == 0 && draw < h.c.cfg.MaxCreateAttempts &&
			errors.As(err, &denied) && denied.Reason == domain.ReasonGroupExists {
			continue
		}
		return res, err
	}
}
