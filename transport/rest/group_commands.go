package rest

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
)

// CommandResult is the data of a group, membership, relation or profile command's answer.
type CommandResult struct {
	GroupID   string `json:"group_id,omitempty" doc:"The group acted on; for a created group its new id (64-bit, as a string)"`
	Topic     string `json:"topic,omitempty" doc:"The conversation the change concerns: the group topic, or the two users' 1:1 topic"`
	Unchanged bool   `json:"unchanged" doc:"True when the state already was what the command asked: nothing was written"`
}

// GroupProfileBody is a group's profile in requests.
type GroupProfileBody struct {
	Name   string `json:"name" doc:"Group name, 1-64 characters on one line" example:"Design team"`
	Avatar string `json:"avatar,omitempty" doc:"Avatar URL"`
	Intro  string `json:"intro,omitempty" doc:"Introduction"`
}

// GroupSettingsBody is a group's settings in requests and answers.
type GroupSettingsBody struct {
	JoinApproval   bool   `json:"join_approval" doc:"Joins go through request and approval"`
	WhoMayInvite   string `json:"who_may_invite" enum:"owner,admin,member" doc:"The lowest role that may invite"`
	WhoMayAnnounce string `json:"who_may_announce" enum:"owner,admin,member" doc:"The lowest role that may set the announcement"`
	MuteAll        bool   `json:"mute_all" doc:"Only the owner and admins may post"`
	Discoverable   *bool  `json:"discoverable,omitempty" doc:"Group search (GET /v1/im/search/groups) finds the group by name. Answers always carry it; in a request, left out keeps the group's current value (false for a new group)"`
}

// CreateGroupRequest is the body of POST /v1/im/groups.
type CreateGroupRequest struct {
	GroupProfileBody
	Settings *GroupSettingsBody `json:"settings,omitempty" doc:"The group's rules; default: open to join, members invite, admins announce"`
}

// GroupParam is the {gid} path parameter.
type GroupParam struct {
	GID string `path:"gid" doc:"Group id (64-bit decimal, or grp<id>)" example:"1"`
}

// GroupWrite is the input of a group command: the Idempotency-Key and {gid}.
type GroupWrite struct {
	IdempotencyHeader
	GroupParam
}

type createGroupInput struct {
	IdempotencyHeader
	Body CreateGroupRequest
}

type groupProfileInput struct {
	GroupWrite
	Body GroupProfileBody
}

type groupSettingsInput struct {
	GroupWrite
	Body GroupSettingsBody
}

type announcementInput struct {
	GroupWrite
	Body struct {
		Text string `json:"text" doc:"The announcement; empty removes it"`
	}
}

type transferInput struct {
	GroupWrite
	Body struct {
		To string `json:"to" doc:"The member who becomes owner (user id as a string)" example:"42"`
	}
}

// groupErrs are the error statuses of group commands besides the standard ones.
var groupErrs = []int{http.StatusForbidden, http.StatusNotFound}

func (a *API) registerGroupCommands() {
	g := a.h.Groups
	huma.Register(a.huma, a.build(op{id: "create-group", method: http.MethodPost, path: "/v1/im/groups",
		summary: "Create a group", tag: "groups", status: http.StatusCreated,
		desc: "Creates a group owned by the caller, who is its first member. data.group_id is the new id."}),
		func(ctx context.Context, in *createGroupInput) (*reply[CommandResult], error) {
			if err := a.limitAction(ctx, domain.RateGroupCreateUser); err != nil {
				return nil, err
			}
			p := principal(ctx)
			profile, err := domain.NewGroupProfile(in.Body.Name, in.Body.Avatar, in.Body.Intro)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			cmd := group.CreateGroup{Actor: p.domain(), Profile: profile, Meta: meta(ctx)}
			if in.Body.Settings != nil {
				s, err := in.Body.Settings.settings()
				if err != nil {
					return nil, a.fail(ctx, err)
				}
				cmd.Settings = &s
			}
			return a.command(ctx, http.StatusCreated, func() (group.Result, error) { return g.CreateGroup.Handle(ctx, cmd) })
		})
	groupCommand(a, op{id: "update-group-profile", method: http.MethodPut, path: "/v1/im/groups/{gid}/profile",
		summary: "Replace a group's profile", desc: "Owner and admins. An unchanged profile writes nothing (unchanged=true)."},
		func(ctx context.Context, in *groupProfileInput) (*reply[CommandResult], error) {
			gid, profile, err := in.parse()
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			cmd := group.UpdateGroupProfile{Actor: principal(ctx).domain(), Group: gid, Profile: profile, Meta: meta(ctx)}
			return a.command(ctx, http.StatusOK, func() (group.Result, error) { return g.UpdateGroupProfile.Handle(ctx, cmd) })
		})
	groupCommand(a, op{id: "update-group-settings", method: http.MethodPut, path: "/v1/im/groups/{gid}/settings",
		summary: "Replace a group's settings", desc: "Owner and admins. Turning mute_all on takes effect at once. " +
			"discoverable, when left out, keeps the group's current value."},
		func(ctx context.Context, in *groupSettingsInput) (*reply[CommandResult], error) {
			gid, err := domain.ParseGroupID(in.GID)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			s, err := in.Body.settings()
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			cmd := group.UpdateGroupSettings{Actor: principal(ctx).domain(), Group: gid, Settings: s, Meta: meta(ctx)}
			if in.Body.Discoverable == nil { // left out: the group's current value, as the store holds it
				cmd.Edit = func(cur domain.GroupSettings) domain.GroupSettings {
					next := s
					next.Discoverable = cur.Discoverable
					return next
				}
			}
			return a.command(ctx, http.StatusOK, func() (group.Result, error) { return g.UpdateGroupSettings.Handle(ctx, cmd) })
		})
	a.registerGroupAdmin()
}

// registerGroupAdmin registers the announcement, ownership transfer and dissolution.
func (a *API) registerGroupAdmin() {
	g := a.h.Groups
	groupCommand(a, op{id: "update-group-announcement", method: http.MethodPut, path: "/v1/im/groups/{gid}/announcement",
		summary: "Set a group's announcement", desc: "The roles the group's who_may_announce names; never a muted member."},
		func(ctx context.Context, in *announcementInput) (*reply[CommandResult], error) {
			gid, err := domain.ParseGroupID(in.GID)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			cmd := group.UpdateAnnouncement{Actor: principal(ctx).domain(), Group: gid, Text: in.Body.Text, Meta: meta(ctx)}
			return a.command(ctx, http.StatusOK, func() (group.Result, error) { return g.UpdateAnnouncement.Handle(ctx, cmd) })
		})
	groupCommand(a, op{id: "transfer-group", method: http.MethodPost, path: "/v1/im/groups/{gid}/transfer",
		summary: "Transfer a group's ownership", desc: "Owner only; the new owner must be a member. A race with the new owner's removal is 409 conflict."},
		func(ctx context.Context, in *transferInput) (*reply[CommandResult], error) {
			gid, err := domain.ParseGroupID(in.GID)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			to, err := userParam(principal(ctx), "to", in.Body.To)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			cmd := group.TransferOwnership{Actor: principal(ctx).domain(), Group: gid, To: to, Meta: meta(ctx)}
			return a.command(ctx, http.StatusOK, func() (group.Result, error) { return g.TransferOwnership.Handle(ctx, cmd) })
		})
	groupCommand(a, op{id: "dissolve-group", method: http.MethodDelete, path: "/v1/im/groups/{gid}",
		summary: "Dissolve a group", desc: "Owner only. Every later command and post to the group is refused group_dissolved."},
		func(ctx context.Context, in *GroupWrite) (*reply[CommandResult], error) {
			gid, err := domain.ParseGroupID(in.GID)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			cmd := group.DissolveGroup{Actor: principal(ctx).domain(), Group: gid, Meta: meta(ctx)}
			return a.command(ctx, http.StatusOK, func() (group.Result, error) { return g.DissolveGroup.Handle(ctx, cmd) })
		})
}

// groupCommand registers a group command with the "groups" tag and its error statuses.
func groupCommand[I any](a *API, o op, h func(context.Context, *I) (*reply[CommandResult], error)) {
	o.tag = "groups"
	o.errs = append(o.errs, groupErrs...)
	huma.Register(a.huma, a.build(o), h)
}

func (in *groupProfileInput) parse() (domain.GroupID, domain.GroupProfile, error) {
	gid, err := domain.ParseGroupID(in.GID)
	if err != nil {
		return 0, domain.GroupProfile{}, err
	}
	profile, err := domain.NewGroupProfile(in.Body.Name, in.Body.Avatar, in.Body.Intro)
	return gid, profile, err
}

func (b GroupSettingsBody) settings() (domain.GroupSettings, error) {
	invite, err := domain.ParseRole(b.WhoMayInvite)
	if err != nil {
		return domain.GroupSettings{}, &domain.ValidationError{Field: "who_may_invite", Reason: "unknown", Detail: "owner, admin or member"}
	}
	announce, err := domain.ParseRole(b.WhoMayAnnounce)
	if err != nil {
		return domain.GroupSettings{}, &domain.ValidationError{Field: "who_may_announce", Reason: "unknown", Detail: "owner, admin or member"}
	}
	s := domain.GroupSettings{JoinApproval: b.JoinApproval, WhoMayInvite: invite, WhoMayAnnounce: announce, MuteAll: b.MuteAll}
	if b.Discoverable != nil {
		s.Discoverable = *b.Discoverable
	}
	return s, s.Validate()
}

// command runs a command handler and answers with its result.
func (a *API) command(ctx context.Context, status int, run func() (group.Result, error)) (*reply[CommandResult], error) {
	res, err := run()
	if err != nil {
		return nil, a.fail(ctx, err, "tenant_id", principal(ctx).Tenant.String())
	}
	out := CommandResult{Topic: res.Topic.String(), Unchanged: res.Unchanged}
	if res.Group != 0 {
		out.GroupID = res.Group.String()
	}
	return respond(ctx, status, out), nil
}

// meta is the tracing metadata of a command issued by a request.
func meta(ctx context.Context) group.Meta { return group.Meta{TraceID: RequestID(ctx)} }
