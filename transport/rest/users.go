package rest

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
)

// Profile is the data of a user profile answer.
type Profile struct {
	UserID    string `json:"user_id" doc:"User id (64-bit, as a string)"`
	Nickname  string `json:"nickname"`
	Avatar    string `json:"avatar,omitempty"`
	Signature string `json:"signature,omitempty"`
	UpdatedAt string `json:"updated_at"`
}

// ProfilePatch is the body of PATCH /v1/im/users/me. Fields left out keep their values.
type ProfilePatch struct {
	Nickname  *string `json:"nickname,omitempty" doc:"Nickname, 1-32 characters on one line"`
	Avatar    *string `json:"avatar,omitempty" doc:"Avatar URL; empty removes it"`
	Signature *string `json:"signature,omitempty" doc:"Status signature; empty removes it"`
}

type profileInput struct {
	IdempotencyHeader
	Body ProfilePatch
}

func (a *API) registerGetUser() {
	huma.Register(a.huma, a.build(op{id: "get-user", method: http.MethodGet, path: "/v1/im/users/{uid}",
		summary: "Read a user's public profile", tag: "users", errs: []int{http.StatusNotFound},
		desc: "Any user of the tenant may read any public profile; \"me\" is the caller."}),
		func(ctx context.Context, in *userPath) (*reply[Profile], error) {
			p := principal(ctx)
			uid, err := userParam(p, "uid", in.UID)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			u, err := a.h.Business.User(ctx, p.Tenant, uid)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			return respond(ctx, http.StatusOK, Profile{UserID: u.ID.String(), Nickname: u.Nickname, Avatar: u.Avatar,
				Signature: u.Signature, UpdatedAt: rfc3339(u.UpdatedAt)}), nil
		})
}

func (a *API) registerUpdateProfile() {
	huma.Register(a.huma, a.build(op{id: "update-my-profile", method: http.MethodPatch, path: "/v1/im/users/me",
		summary: "Change the caller's public profile", tag: "users",
		desc: "Fields left out keep the values the profile read model holds (a change made a moment ago may not be " +
			"there yet: send every field to be sure). An unchanged profile writes nothing (unchanged=true)."}),
		func(ctx context.Context, in *profileInput) (*reply[CommandResult], error) {
			p := principal(ctx)
			profile, err := a.patchedProfile(ctx, p, in.Body)
			if err != nil {
				return nil, err
			}
			cmd := group.UpdateProfile{Actor: p.domain(), Profile: profile, Meta: meta(ctx)}
			return a.command(ctx, http.StatusOK, func() (group.Result, error) { return a.h.Groups.UpdateProfile.Handle(ctx, cmd) })
		})
}

// patchedProfile applies patch to the caller's current profile from the read model (none when
// there is no read model or no profile yet).
func (a *API) patchedProfile(ctx context.Context, p Principal, patch ProfilePatch) (domain.UserProfile, error) {
	var nickname, avatar, signature string
	if a.h.Business != nil && (patch.Nickname == nil || patch.Avatar == nil || patch.Signature == nil) {
		u, err := a.h.Business.User(ctx, p.Tenant, p.User)
		switch {
		case err == nil:
			nickname, avatar, signature = u.Nickname, u.Avatar, u.Signature
		case !errors.Is(err, domain.ErrNotFound):
			return domain.UserProfile{}, a.fail(ctx, err, "tenant_id", p.Tenant.String())
		}
	}
	if patch.Nickname != nil {
		nickname = *patch.Nickname
	}
	if patch.Avatar != nil {
		avatar = *patch.Avatar
	}
	if patch.Signature != nil {
		signature = *patch.Signature
	}
	profile, err := domain.NewUserProfile(nickname, avatar, signature)
	if err != nil {
		return domain.UserProfile{}, a.fail(ctx, err)
	}
	return profile, nil
}
