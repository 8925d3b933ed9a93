package group

import (
	"context"

	"github.com/imledger/imledger/domain"
)

// UpdateProfile asks to change the actor's public profile: nickname, avatar, signature.
type UpdateProfile struct {
	Actor domain.Principal
	// Patch names the fields to set; the others keep the values of the profile stream's state
	// the change is appended against. UserProfile.Patch replaces the whole profile.
	Patch domain.ProfilePatch
	Meta  Meta
}

// UpdateProfileHandler handles UpdateProfile.
type UpdateProfileHandler struct{ c *core }

// Handle merges the patch into the profile folded from the user's stream and appends
// user.profile_updated.v1 with the whole merged profile, expecting the version it merged
// against: a concurrent change makes the append fail and the patch is merged again into the
// newer state, so neither change loses the other's fields. A patch that leaves the profile as it
// is (the empty patch included) writes nothing (Unchanged). Errors: *domain.ValidationError for a
// bad field or a profile without a nickname; domain.ErrConcurrency after Config.MaxAttempts lost
// races; domain.ErrRetryable.
func (h UpdateProfileHandler) Handle(ctx context.Context, cmd UpdateProfile) (Result, error) {
	s := spec{op: "update profile", actor: cmd.Actor, meta: cmd.Meta}
	return h.c.execute(ctx, s, func(ctx context.Context) (decision, error) {
		st, err := h.c.loader.Profile(ctx, cmd.Actor.Tenant, cmd.Actor.User, 0)
		if err != nil {
			return decision{}, err
		}
		events, err := st.Patch(cmd.Actor, cmd.Patch, h.c.now())
		return decision{events: events, bizID: cmd.Actor.User.String()}, err
	})
}
