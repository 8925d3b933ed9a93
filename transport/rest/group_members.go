package rest

import (
	"context"
	"net/http"
	"time"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
)

// MemberWrite is the input of a command about a member: the Idempotency-Key, {gid} and {uid}.
type MemberWrite struct {
	GroupWrite
	UID string `path:"uid" doc:"The member's user id (64-bit decimal)" example:"42"`
}

type userBody struct {
	UserID string `json:"user_id" doc:"The user (64-bit, as a string)" example:"42"`
}

type inviteInput struct {
	GroupWrite
	Body userBody
}

type joinRequestInput struct {
	GroupWrite
	Body struct {
		Message string `json:"message,omitempty" doc:"A note to the admins"`
	}
}

type removeInput struct {
	MemberWrite
	Ban bool `query:"ban" doc:"Also ban the user from joining, requesting or being invited again until unbanned"`
}

type roleInput struct {
	MemberWrite
	Body struct {
		Role string `json:"role" enum:"admin,member" doc:"The new role"`
	}
}

type muteInput struct {
	MemberWrite
	Body struct {
		Until string `json:"until" doc:"When the mute ends, UTC RFC 3339, in the future" example:"2030-01-01T00:00:00Z"`
	}
}

// parse returns the group and member of a member command.
func (in *MemberWrite) parse(p Principal) (domain.GroupID, domain.UserID, error) {
	gid, err := domain.ParseGroupID(in.GID)
	if err != nil {
		return 0, 0, err
	}
	uid, err := userParam(p, "uid", in.UID)
	return gid, uid, err
}

func (a *API) registerMemberCommands() {
	g := a.h.Groups
	groupCommand(a, op{id: "invite-member", method: http.MethodPost, path: "/v1/im/groups/{gid}/invites",
		summary: "Invite a user into a group", desc: "The roles the group's who_may_invite names. 403 already_member, banned."},
		func(ctx context.Context, in *inviteInput) (*reply[CommandResult], error) {
			p := principal(ctx)
			gid, err := domain.ParseGroupID(in.GID)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			uid, err := userParam(p, "user_id", in.Body.UserID)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			cmd := group.InviteMember{Actor: p.domain(), Group: gid, User: uid, Meta: meta(ctx)}
			return a.command(ctx, http.StatusOK, func() (group.Result, error) { return g.InviteMember.Handle(ctx, cmd) })
		})
	self := []struct {
		id, path, summary, desc string
		run                     func(context.Context, domain.Principal, domain.GroupID, group.Meta) (group.Result, error)
	}{
		{"accept-invite", "/v1/im/groups/{gid}/invites/accept", "Accept an invitation", "403 not_invited, group_full, banned.",
			func(ctx context.Context, p domain.Principal, gid domain.GroupID, m group.Meta) (group.Result, error) {
				return g.AcceptInvite.Handle(ctx, group.AcceptInvite{Actor: p, Group: gid, Meta: m})
			}},
		{"join-group", "/v1/im/groups/{gid}/join", "Join an open group", "403 approval_required (use join-requests), group_full, banned.",
			func(ctx context.Context, p domain.Principal, gid domain.GroupID, m group.Meta) (group.Result, error) {
				return g.JoinGroup.Handle(ctx, group.JoinGroup{Actor: p, Group: gid, Meta: m})
			}},
		{"leave-group", "/v1/im/groups/{gid}/leave", "Leave a group", "403 owner_cannot_leave (transfer first), not_member.",
			func(ctx context.Context, p domain.Principal, gid domain.GroupID, m group.Meta) (group.Result, error) {
				return g.LeaveGroup.Handle(ctx, group.LeaveGroup{Actor: p, Group: gid, Meta: m})
			}},
	}
	for _, s := range self {
		groupCommand(a, op{id: s.id, method: http.MethodPost, path: s.path, summary: s.summary, desc: s.desc},
			func(ctx context.Context, in *GroupWrite) (*reply[CommandResult], error) {
				gid, err := domain.ParseGroupID(in.GID)
				if err != nil {
					return nil, a.fail(ctx, err)
				}
				return a.command(ctx, http.StatusOK, func() (group.Result, error) { return s.run(ctx, principal(ctx).domain(), gid, meta(ctx)) })
			})
	}
	groupCommand(a, op{id: "request-join", method: http.MethodPost, path: "/v1/im/groups/{gid}/join-requests",
		summary: "Ask to join a group that needs approval", desc: "403 approval_not_required (join directly), already_member, banned."},
		func(ctx context.Context, in *joinRequestInput) (*reply[CommandResult], error) {
			gid, err := domain.ParseGroupID(in.GID)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			cmd := group.RequestJoin{Actor: principal(ctx).domain(), Group: gid, Message: in.Body.Message, Meta: meta(ctx)}
			return a.command(ctx, http.StatusOK, func() (group.Result, error) { return g.RequestJoin.Handle(ctx, cmd) })
		})
	a.registerModeration()
}

// registerModeration registers the commands of admins and owners about another member.
func (a *API) registerModeration() {
	g := a.h.Groups
	other := []struct {
		id, method, path, summary, desc string
		run                             func(context.Context, domain.Principal, domain.GroupID, domain.UserID, group.Meta) (group.Result, error)
	}{
		{"approve-join", http.MethodPost, "/v1/im/groups/{gid}/join-requests/{uid}/approve", "Approve a join request",
			"Owner and admins. 403 no_pending_request, group_full.",
			func(ctx context.Context, p domain.Principal, gid domain.GroupID, uid domain.UserID, m group.Meta) (group.Result, error) {
				return g.ApproveJoin.Handle(ctx, group.ApproveJoin{Actor: p, Group: gid, User: uid, Meta: m})
			}},
		{"reject-join", http.MethodPost, "/v1/im/groups/{gid}/join-requests/{uid}/reject", "Reject a join request",
			"Owner and admins. 403 no_pending_request.",
			func(ctx context.Context, p domain.Principal, gid domain.GroupID, uid domain.UserID, m group.Meta) (group.Result, error) {
				return g.RejectJoin.Handle(ctx, group.RejectJoin{Actor: p, Group: gid, User: uid, Meta: m})
			}},
		{"unban-member", http.MethodPost, "/v1/im/groups/{gid}/members/{uid}/unban", "Lift a ban",
			"Owner and admins. 403 not_banned.",
			func(ctx context.Context, p domain.Principal, gid domain.GroupID, uid domain.UserID, m group.Meta) (group.Result, error) {
				return g.UnbanMember.Handle(ctx, group.UnbanMember{Actor: p, Group: gid, User: uid, Meta: m})
			}},
		{"unmute-member", http.MethodDelete, "/v1/im/groups/{gid}/members/{uid}/mute", "Lift a mute",
			"Owner, and admins for plain members. A mute not in force writes nothing (unchanged=true).",
			func(ctx context.Context, p domain.Principal, gid domain.GroupID, uid domain.UserID, m group.Meta) (group.Result, error) {
				return g.UnmuteMember.Handle(ctx, group.UnmuteMember{Actor: p, Group: gid, User: uid, Meta: m})
			}},
	}
	for _, s := range other {
		groupCommand(a, op{id: s.id, method: s.method, path: s.path, summary: s.summary, desc: s.desc},
			func(ctx context.Context, in *MemberWrite) (*reply[CommandResult], error) {
				p := principal(ctx)
				gid, uid, err := in.parse(p)
				if err != nil {
					return nil, a.fail(ctx, err)
				}
				return a.command(ctx, http.StatusOK, func() (group.Result, error) { return s.run(ctx, p.domain(), gid, uid, meta(ctx)) })
			})
	}
	groupCommand(a, op{id: "remove-member", method: http.MethodDelete, path: "/v1/im/groups/{gid}/members/{uid}",
		summary: "Remove a member", desc: "The owner removes anyone else, an admin plain members only; ban=true also bans."},
		func(ctx context.Context, in *removeInput) (*reply[CommandResult], error) {
			p := principal(ctx)
			gid, uid, err := in.parse(p)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			cmd := group.RemoveMember{Actor: p.domain(), Group: gid, User: uid, Ban: in.Ban, Meta: meta(ctx)}
			return a.command(ctx, http.StatusOK, func() (group.Result, error) { return g.RemoveMember.Handle(ctx, cmd) })
		})
	groupCommand(a, op{id: "set-member-role", method: http.MethodPut, path: "/v1/im/groups/{gid}/members/{uid}/role",
		summary: "Set a member's role", desc: "Owner only; admin or member (ownership moves with transfer)."},
		func(ctx context.Context, in *roleInput) (*reply[CommandResult], error) {
			p := principal(ctx)
			gid, uid, err := in.parse(p)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			role, err := domain.ParseRole(in.Body.Role)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			cmd := group.SetRole{Actor: p.domain(), Group: gid, User: uid, Role: role, Meta: meta(ctx)}
			return a.command(ctx, http.StatusOK, func() (group.Result, error) { return g.SetRole.Handle(ctx, cmd) })
		})
	groupCommand(a, op{id: "mute-member", method: http.MethodPut, path: "/v1/im/groups/{gid}/members/{uid}/mute",
		summary: "Mute a member until a time", desc: "The owner mutes anyone else, an admin plain members only."},
		func(ctx context.Context, in *muteInput) (*reply[CommandResult], error) {
			p := principal(ctx)
			gid, uid, err := in.parse(p)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			until, err := time.Parse(time.RFC3339Nano, in.Body.Until)
			if err != nil {
				return nil, a.fail(ctx, &domain.ValidationError{Field: "until", Reason: "bad_format", Detail: "RFC 3339"})
			}
			cmd := group.MuteMember{Actor: p.domain(), Group: gid, User: uid, Until: until.UTC(), Meta: meta(ctx)}
			return a.command(ctx, http.StatusOK, func() (group.Result, error) { return g.MuteMember.Handle(ctx, cmd) })
		})
}
