package rest

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/business"
)

// BusinessReader reads groups, memberships, relations and profiles from the read model;
// *business.Store implements it. Unknown entities wrap domain.ErrNotFound.
type BusinessReader interface {
	MembershipReader
	Group(ctx context.Context, tenant domain.TenantID, gid domain.GroupID) (business.Group, error)
	Settings(ctx context.Context, tenant domain.TenantID, gid domain.GroupID) (domain.GroupSettings, error)
	Members(ctx context.Context, tenant domain.TenantID, gid domain.GroupID, cursor string, limit int) ([]business.Member, string, error)
	UserGroups(ctx context.Context, tenant domain.TenantID, uid domain.UserID) ([]domain.GroupID, error)
	Friends(ctx context.Context, tenant domain.TenantID, uid domain.UserID) ([]domain.UserID, error)
	Blocklist(ctx context.Context, tenant domain.TenantID, uid domain.UserID) ([]domain.UserID, error)
	User(ctx context.Context, tenant domain.TenantID, uid domain.UserID) (business.User, error)
}

var _ BusinessReader = (*business.Store)(nil)

// Group is the data of a group answer.
type Group struct {
	GroupID      string            `json:"group_id" doc:"Group id (64-bit, as a string)"`
	Topic        string            `json:"topic" doc:"The group's topic, grp<id>"`
	Name         string            `json:"name"`
	Avatar       string            `json:"avatar,omitempty"`
	Intro        string            `json:"intro,omitempty"`
	Owner        string            `json:"owner" doc:"The owner's user id"`
	MemberCount  int               `json:"member_count" doc:"Current members: a JSON number, bounded by the group size limit (not a 64-bit value)"`
	Announcement string            `json:"announcement,omitempty"`
	Status       string            `json:"status" enum:"normal,dissolved"`
	Settings     GroupSettingsBody `json:"settings"`
	CreatedAt    string            `json:"created_at"`
	UpdatedAt    string            `json:"updated_at"`
}

// Member is one member in a member list.
type Member struct {
	UserID     string `json:"user_id"`
	Role       string `json:"role" enum:"owner,admin,member"`
	JoinedAt   string `json:"joined_at,omitempty"`
	MutedUntil string `json:"muted_until,omitempty" doc:"Set while a mute may be in force; compare with server_time"`
}

// MemberPage is the data of a member list answer.
type MemberPage struct {
	Members    []Member `json:"members" doc:"Owner first, then admins, then members, each by user id"`
	NextCursor string   `json:"next_cursor,omitempty" doc:"Pass as cursor for the next page; absent after the last"`
}

// GroupList is the data of the caller's group list.
type GroupList struct {
	GroupIDs []string `json:"group_ids" doc:"The groups the caller is a member of"`
}

// UserList is the data of a friend or block list.
type UserList struct {
	UserIDs []string `json:"user_ids"`
}

type membersInput struct {
	GroupParam
	Cursor string `query:"cursor" doc:"The next_cursor of the previous page"`
	Limit  int    `query:"limit" minimum:"0" maximum:"500" doc:"Page size; the server's default when 0"`
}

func (a *API) registerBusinessReads() {
	huma.Register(a.huma, a.build(op{id: "get-group", method: http.MethodGet, path: "/v1/im/groups/{gid}",
		summary: "Read a group's profile and settings", tag: "groups", errs: []int{http.StatusNotFound},
		desc: "Any user of the tenant may read a group's profile."}),
		func(ctx context.Context, in *GroupParam) (*reply[Group], error) {
			return a.readGroup(ctx, in.GID)
		})
	huma.Register(a.huma, a.build(op{id: "list-members", method: http.MethodGet, path: "/v1/im/groups/{gid}/members",
		summary: "List a group's members", tag: "groups", errs: []int{http.StatusForbidden, http.StatusNotFound},
		desc: "Members only. Paged with an opaque cursor."}),
		func(ctx context.Context, in *membersInput) (*reply[MemberPage], error) {
			return a.listMembers(ctx, in)
		})
	huma.Register(a.huma, a.build(op{id: "list-my-groups", method: http.MethodGet, path: "/v1/im/groups",
		summary: "List the caller's groups", tag: "groups"}),
		func(ctx context.Context, _ *struct{}) (*reply[GroupList], error) {
			p := principal(ctx)
			ids, err := a.h.Business.UserGroups(ctx, p.Tenant, p.User)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			out := GroupList{GroupIDs: make([]string, len(ids))}
			for i, id := range ids {
				out.GroupIDs[i] = id.String()
			}
			return respond(ctx, http.StatusOK, out), nil
		})
	a.registerUserList("list-friends", "/v1/im/friends", "List the caller's friends", "friends", a.h.Business.Friends)
	a.registerUserList("list-blocks", "/v1/im/blocks", "List the users the caller blocks", "blocks", a.h.Business.Blocklist)
	a.registerGetUser()
}

func (a *API) readGroup(ctx context.Context, gidText string) (*reply[Group], error) {
	p := principal(ctx)
	gid, err := domain.ParseGroupID(gidText)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	g, err := a.h.Business.Group(ctx, p.Tenant, gid)
	if err != nil {
		return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	s, err := a.h.Business.Settings(ctx, p.Tenant, gid)
	if err != nil {
		return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	return respond(ctx, http.StatusOK, Group{GroupID: g.ID.String(), Topic: g.Topic, Name: g.Name, Avatar: g.Avatar,
		Intro: g.Intro, Owner: g.Owner.String(), MemberCount: g.MemberCount, Announcement: g.Announcement,
		Status: g.Status, CreatedAt: rfc3339(g.CreatedAt), UpdatedAt: rfc3339(g.UpdatedAt),
		Settings: GroupSettingsBody{JoinApproval: s.JoinApproval, WhoMayInvite: s.WhoMayInvite.String(),
			WhoMayAnnounce: s.WhoMayAnnounce.String(), MuteAll: s.MuteAll, Discoverable: &s.Discoverable}}), nil
}

func (a *API) listMembers(ctx context.Context, in *membersInput) (*reply[MemberPage], error) {
	p := principal(ctx)
	gid, err := domain.ParseGroupID(in.GID)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	topic, err := gid.Topic()
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	if err := a.h.ReadPolicy.CanRead(ctx, p.Tenant, p.User, topic); err != nil {
		return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	ms, next, err := a.h.Business.Members(ctx, p.Tenant, gid, in.Cursor, in.Limit)
	if err != nil {
		if ve, ok := err.(*domain.ValidationError); ok && ve.Field == "" {
			ve.Field = "cursor"
		}
		return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	out := MemberPage{Members: make([]Member, len(ms)), NextCursor: next}
	for i, m := range ms {
		out.Members[i] = Member{UserID: m.User.String(), Role: m.Role.String(), JoinedAt: rfc3339(m.JoinedAt),
			MutedUntil: rfc3339(m.MutedUntil)}
	}
	return respond(ctx, http.StatusOK, out), nil
}

func (a *API) registerUserList(id, path, summary, tag string,
	list func(context.Context, domain.TenantID, domain.UserID) ([]domain.UserID, error)) {
	huma.Register(a.huma, a.build(op{id: id, method: http.MethodGet, path: path, summary: summary, tag: tag}),
		func(ctx context.Context, _ *struct{}) (*reply[UserList], error) {
			p := principal(ctx)
			ids, err := list(ctx, p.Tenant, p.User)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			out := UserList{UserIDs: make([]string, len(ids))}
			for i, id := range ids {
				out.UserIDs[i] = id.String()
			}
			return respond(ctx, http.StatusOK, out), nil
		})
}
