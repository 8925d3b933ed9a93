package rest

import (
	"context"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/business"
)

// SearchReader serves search, the batch profile read and the pending group requests from the
// business read model;
// *business.Store implements it. Bad input is a *domain.ValidationError.
type SearchReader interface {
	SearchUsers(ctx context.Context, tenant domain.TenantID, q business.UserSearch) ([]business.UserHit, string, error)
	SearchGroups(ctx context.Context, tenant domain.TenantID, q business.GroupSearch) ([]business.GroupHit, string, error)
	UsersByID(ctx context.Context, tenant domain.TenantID, ids []domain.UserID) ([]business.User, error)
	GroupRequests(ctx context.Context, tenant domain.TenantID, uid domain.UserID) ([]business.GroupRequest, error)
}

var _ SearchReader = (*business.Store)(nil)

// UserHit is a user a search found.
type UserHit struct {
	UserID    string `json:"user_id" doc:"User id (64-bit, as a string)"`
	Login     string `json:"login" doc:"The login name, in lower case"`
	Nickname  string `json:"nickname"`
	Avatar    string `json:"avatar,omitempty"`
	Signature string `json:"signature,omitempty"`
	Blocked   bool   `json:"blocked,omitempty" doc:"The caller blocks this user"`
}

// UserSearchPage is the data of a user search answer.
type UserSearchPage struct {
	Users      []UserHit `json:"users"`
	NextCursor string    `json:"next_cursor,omitempty" doc:"Pass as cursor for the next page; absent after the last"`
}

// GroupHit is a group a search found.
type GroupHit struct {
	GroupID      string `json:"group_id" doc:"Group id (64-bit, as a string)"`
	Topic        string `json:"topic"`
	Name         string `json:"name"`
	Avatar       string `json:"avatar,omitempty"`
	Intro        string `json:"intro,omitempty"`
	MemberCount  int    `json:"member_count"`
	JoinApproval bool   `json:"join_approval" doc:"Joining takes a request the owner or an admin approves"`
}

// GroupSearchPage is the data of a group search answer.
type GroupSearchPage struct {
	Groups     []GroupHit `json:"groups"`
	NextCursor string     `json:"next_cursor,omitempty" doc:"Pass as cursor for the next page; absent after the last"`
}

// ProfileList is the data of a batch profile read.
type ProfileList struct {
	Users []Profile `json:"users" doc:"The profiles found, in the order asked, each once; unknown users are left out"`
}

// GroupRequestEntry is a pending invitation or join request the caller has a say in.
type GroupRequestEntry struct {
	Kind      string `json:"kind" enum:"invitation,join_request"`
	Direction string `json:"direction" enum:"incoming,outgoing" doc:"incoming: the caller decides it (an invitation to them, a request to a group they own or administer); outgoing: the caller's own request"`
	GroupID   string `json:"group_id"`
	Topic     string `json:"topic"`
	Name      string `json:"name" doc:"The group's name"`
	UserID    string `json:"user_id" doc:"The invitee or the requester"`
	By        string `json:"by,omitempty" doc:"Who invited (invitations)"`
	Message   string `json:"message,omitempty" doc:"A join request's message"`
	At        string `json:"at"`
}

// GroupRequestList is the data of the pending group requests answer.
type GroupRequestList struct {
	Requests []GroupRequestEntry `json:"requests"`
}

type searchInput struct {
	Q      string `query:"q" doc:"The prefix: 1-64 characters" example:"ali"`
	Cursor string `query:"cursor" doc:"The next_cursor of the previous page"`
	Limit  int    `query:"limit" minimum:"0" maximum:"50" doc:"Page size; 20 when 0"`
}

type userSearchInput struct {
	Q      string `query:"q" doc:"The prefix: 1-64 characters" example:"ali"`
	By     string `query:"by" enum:"nickname,login" doc:"What the prefix matches; default nickname"`
	Cursor string `query:"cursor" doc:"The next_cursor of the previous page"`
	Limit  int    `query:"limit" minimum:"0" maximum:"50" doc:"Page size; 20 when 0"`
}

type usersInput struct {
	IDs string `query:"ids" doc:"Comma-separated user ids, at most 100" example:"42,43"`
}

func (a *API) registerSearch() {
	huma.Register(a.huma, a.build(op{id: "search-users", method: http.MethodGet, path: "/v1/im/search/users",
		summary: "Find users by login or nickname prefix", tag: "search",
		desc: "Users of the caller's tenant whose nickname (by=nickname, the default) or login name (by=login) starts " +
			"with q, ordered by that field, then by id, and paged with an opaque cursor. Nicknames match regardless of " +
			"case and accents (\"ali\" finds \"Álice\"); a login prefix is folded to lower case as logins are and " +
			"matched exactly. Users who opted out of search (PATCH /v1/im/users/me, discoverable=false) and users who " +
			"block the caller are not found; users the caller blocks are, with blocked=true."}),
		func(ctx context.Context, in *userSearchInput) (*reply[UserSearchPage], error) {
			p := principal(ctx)
			hits, next, err := a.h.Search.SearchUsers(ctx, p.Tenant, business.UserSearch{Searcher: p.User,
				By: business.SearchBy(in.By), Prefix: in.Q, Cursor: in.Cursor, Limit: in.Limit})
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			out := UserSearchPage{Users: make([]UserHit, len(hits)), NextCursor: next}
			for i, h := range hits {
				out.Users[i] = UserHit{UserID: h.ID.String(), Login: h.Login, Nickname: h.Nickname, Avatar: h.Avatar,
					Signature: h.Signature, Blocked: h.BlockedBySearcher}
			}
			return respond(ctx, http.StatusOK, out), nil
		})
	huma.Register(a.huma, a.build(op{id: "search-groups", method: http.MethodGet, path: "/v1/im/search/groups",
		summary: "Find public groups by name prefix", tag: "search",
		desc: "Groups of the caller's tenant whose settings make them discoverable and whose name starts with q " +
			"(regardless of case and accents), ordered by name, then by id, and paged with an opaque cursor. " +
			"Dissolved groups are not found."}),
		func(ctx context.Context, in *searchInput) (*reply[GroupSearchPage], error) {
			p := principal(ctx)
			hits, next, err := a.h.Search.SearchGroups(ctx, p.Tenant, business.GroupSearch{Prefix: in.Q, Cursor: in.Cursor, Limit: in.Limit})
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			out := GroupSearchPage{Groups: make([]GroupHit, len(hits)), NextCursor: next}
			for i, h := range hits {
				out.Groups[i] = GroupHit{GroupID: h.ID.String(), Topic: "grp" + h.ID.String(), Name: h.Name,
					Avatar: h.Avatar, Intro: h.Intro, MemberCount: h.MemberCount, JoinApproval: h.JoinApproval}
			}
			return respond(ctx, http.StatusOK, out), nil
		})
	huma.Register(a.huma, a.build(op{id: "get-users", method: http.MethodGet, path: "/v1/im/users",
		summary: "Read many users' public profiles", tag: "users",
		desc: "Up to 100 user ids, comma-separated, in one request: the profiles in the order asked, each once. " +
			"Users without a profile are left out. Like GET /v1/im/users/{uid}, any user of the tenant may read any " +
			"public profile."}),
		func(ctx context.Context, in *usersInput) (*reply[ProfileList], error) {
			p := principal(ctx)
			ids, err := parseUserIDs(in.IDs)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			users, err := a.h.Search.UsersByID(ctx, p.Tenant, ids)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			out := ProfileList{Users: make([]Profile, len(users))}
			for i, u := range users {
				out.Users[i] = Profile{UserID: u.ID.String(), Nickname: u.Nickname, Avatar: u.Avatar,
					Signature: u.Signature, UpdatedAt: rfc3339(u.UpdatedAt)}
			}
			return respond(ctx, http.StatusOK, out), nil
		})
}

func (a *API) registerGroupRequests() {
	huma.Register(a.huma, a.build(op{id: "list-group-requests", method: http.MethodGet, path: "/v1/im/groups/requests",
		summary: "List the pending group invitations and join requests the caller has a say in", tag: "groups",
		desc: "Invitations to the caller, the caller's own join requests, and the join requests of the groups the caller " +
			"owns or administers, newest first, at most 500; dissolved groups are left out. The per-user channel " +
			"carries each as it happens; a client re-reads this list when the channel says resync."}),
		func(ctx context.Context, _ *struct{}) (*reply[GroupRequestList], error) {
			p := principal(ctx)
			rs, err := a.h.Search.GroupRequests(ctx, p.Tenant, p.User)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			out := GroupRequestList{Requests: make([]GroupRequestEntry, len(rs))}
			for i, r := range rs {
				e := GroupRequestEntry{Kind: "join_request", Direction: "outgoing", GroupID: r.Group.String(),
					Topic: "grp" + r.Group.String(), Name: r.Name, UserID: r.User.String(), Message: r.Message, At: rfc3339(r.At)}
				if r.Invitation {
					e.Kind, e.By = "invitation", r.By.String()
				}
				if r.Incoming {
					e.Direction = "incoming"
				}
				out.Requests[i] = e
			}
			return respond(ctx, http.StatusOK, out), nil
		})
}

// parseUserIDs parses the ids query parameter: comma-separated decimal user ids, at most
// business.MaxUsersByID of them (the bound is checked before parsing, so a huge list costs
// nothing).
func parseUserIDs(s string) ([]domain.UserID, error) {
	if s == "" {
		return nil, &domain.ValidationError{Field: "ids", Reason: "required"}
	}
	if strings.Count(s, ",") >= business.MaxUsersByID {
		return nil, &domain.ValidationError{Field: "ids", Reason: "too_many", Detail: "at most 100 user ids"}
	}
	parts := strings.Split(s, ",")
	out := make([]domain.UserID, 0, len(parts))
	for _, part := range parts {
		id, err := domain.ParseUserID(strings.TrimSpace(part))
		if err != nil {
			return nil, &domain.ValidationError{Field: "ids", Reason: "bad_format", Detail: "comma-separated positive 64-bit user ids"}
		}
		out = append(out, id)
	}
	return out, nil
}
