package group

import (
	"context"

	"github.com/imledger/imledger/domain"
)

// UpdateProfile asks to replace the actor's public profile: nickname, avatar, signature.
type UpdateProfile struct {
	Actor   domain.Principal
	Profile domain.UserProfile // the whole new profile; build it with domain.NewUserProfile
	Meta    Meta
}

// UpdateProfileHandler handles UpdateProfile.
type UpdateProfileHandler struct{ c *core }

// Handle appends user.profile_updated.v1 to the user's profile stream; an unchanged profile
// writes nothing (Unchanged). Errors: *domain.ValidationError for a zero profile;
// domain.ErrConcurrency after Config.MaxAttempts lost races; domain.ErrRetryable.
func (h UpdateProfileHandler) Handle(ctx context.Context, cmd UpdateProfile) (Result, error) {
	s := spec{op: "update profile", actor: cmd.Actor, meta: cmd.Meta}
	return h.c.execute(ctx, s, func(ctx context.Context) (decision, error) {
		st, err := h.c.loader.Profile(ctx, cmd.Actor.Tenant, cmd.Actor.User, 0)
		if err != nil {
			return decision{}, err
		}
		events, err := st.Update(cmd.Actor, cmd.Profile, h.c.now())
		return decision{events: events, bizID: cmd.Actor.User.String()}, err
	})
}
