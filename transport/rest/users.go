package rest

import (
	"context"
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
	Nickname     *string `json:"nickname,omitempty" doc:"Nickname, 1-32 characters on one line"`
	Avatar       *string `json:"avatar,omitempty" doc:"Avatar URL; empty removes it"`
	Signature    *string `json:"signature,omitempty" doc:"Status signature; empty removes it"`
	Discoverable *bool   `json:"discoverable,omitempty" doc:"Whether other users' search (GET /v1/im/search/users) finds the caller; a user who never chose is found"`
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
		desc: "Fields left out keep their values: the patch is merged into the profile as the event store holds it, " +
			"at the version the change is appended against, so a change made a moment ago is never undone and " +
			"concurrent patches of different fields all take effect. A patch that changes nothing, the empty one " +
			"included, writes nothing (unchanged=true)."}),
		func(ctx context.Context, in *profileInput) (*reply[CommandResult], error) {
			p := principal(ctx)
			patch := domain.ProfilePatch{Nickname: in.Body.Nickname, Avatar: in.Body.Avatar, Signature: in.Body.Signature,
				Discoverable: in.Body.Discoverable}
			cmd := group.UpdateProfile{Actor: p.domain(), Patch: patch, Meta: meta(ctx)}
			return a.command(ctx, http.StatusOK, func() (group.Result, error) { return a.h.Groups.UpdateProfile.Handle(ctx, cmd) })
		})
}
