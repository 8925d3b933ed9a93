package domain

import (
	"strings"
	"time"
)

// Principal is who issues a command: an authenticated user of a tenant. Roles are never taken
// from the caller; they come from the membership state the command is checked against.
type Principal struct {
	Tenant TenantID
	User   UserID
}

// Stable refusal reasons. A refused command returns Deny(reason) (a *DeniedError wrapping
// ErrForbidden) with one of these; transport passes the reason to clients unchanged, so a
// published reason is never renamed.
const (
	// ReasonTenantMismatch: the aggregate belongs to another tenant than the principal.
	ReasonTenantMismatch = "tenant_mismatch"
	// ReasonNotMember: the actor is not a current member of the group.
	ReasonNotMember = "not_member"
	// ReasonTargetNotMember: the user acted upon is not a current member of the group.
	ReasonTargetNotMember = "target_not_member"
	// ReasonMuted: the actor is muted in the group until a time after now.
	ReasonMuted = "muted"
	// ReasonGroupMuted: the group is muted for everyone but the owner and admins.
	ReasonGroupMuted = "group_muted"
	// ReasonNotAdmin: the command needs the owner or an admin.
	ReasonNotAdmin = "not_admin"
	// ReasonNotOwner: the command needs the owner.
	ReasonNotOwner = "not_owner"
	// ReasonCannotRemoveAdmin: an admin tried to remove another admin.
	ReasonCannotRemoveAdmin = "cannot_remove_admin"
	// ReasonCannotRemoveOwner: nobody removes the owner.
	ReasonCannotRemoveOwner = "cannot_remove_owner"
	// ReasonCannotMuteAdmin: an admin tried to mute another admin.
	ReasonCannotMuteAdmin = "cannot_mute_admin"
	// ReasonCannotMuteOwner: nobody mutes the owner.
	ReasonCannotMuteOwner = "cannot_mute_owner"
	// ReasonOwnerCannotLeave: the owner must transfer ownership (or dissolve) before leaving.
	ReasonOwnerCannotLeave = "owner_cannot_leave"
	// ReasonGroupDissolved: the group is dissolved and accepts no command.
	ReasonGroupDissolved = "group_dissolved"
	// ReasonGroupExists: the group id is already taken.
	ReasonGroupExists = "group_exists"
	// ReasonGroupFull: the group has reached its member limit.
	ReasonGroupFull = "group_full"
	// ReasonAlreadyMember: the user is already a member.
	ReasonAlreadyMember = "already_member"
	// ReasonNotInvited: the user holds no pending invitation.
	ReasonNotInvited = "not_invited"
	// ReasonApprovalRequired: the group needs approval; send a join request instead.
	ReasonApprovalRequired = "approval_required"
	// ReasonApprovalNotRequired: the group needs no approval; join directly instead.
	ReasonApprovalNotRequired = "approval_not_required"
	// ReasonNoPendingRequest: there is no pending join or friend request to decide.
	ReasonNoPendingRequest = "no_pending_request"
	// ReasonBanned: the user was removed from the group with a ban and may not come back until unbanned.
	ReasonBanned = "banned"
	// ReasonNotBanned: the user is not banned from the group.
	ReasonNotBanned = "not_banned"
	// ReasonSelfAction: the command may not target the actor itself.
	ReasonSelfAction = "self_action"
	// ReasonNotSelf: only the user may change their own profile.
	ReasonNotSelf = "not_self"
	// ReasonNotParty: the actor is not one of the two users of the relation.
	ReasonNotParty = "not_party"
	// ReasonNotFriends: the two users are not friends.
	ReasonNotFriends = "not_friends"
	// ReasonAlreadyFriends: the two users are already friends.
	ReasonAlreadyFriends = "already_friends"
	// ReasonAlreadyRequested: the actor already has a pending friend request to the peer.
	ReasonAlreadyRequested = "already_requested"
	// ReasonBlocked: the peer has blocked the actor.
	ReasonBlocked = "blocked"
	// ReasonBlocking: the actor has blocked the peer and must unblock first.
	ReasonBlocking = "blocking"
	// ReasonAlreadyBlocked: the actor already blocks the peer.
	ReasonAlreadyBlocked = "already_blocked"
	// ReasonNotBlocked: the actor does not block the peer.
	ReasonNotBlocked = "not_blocked"
)

// Role is a member's role in a group. The set is fixed: owner, admin, member. Roles are ordered:
// the owner outranks admins, admins outrank members.
type Role string

// The roles.
const (
	RoleOwner  Role = "owner"
	RoleAdmin  Role = "admin"
	RoleMember Role = "member"
)

// ParseRole validates s as one of the three roles.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleOwner, RoleAdmin, RoleMember:
		return r, nil
	}
	return "", invalid("role", "unknown", "one of owner, admin, member")
}

// String returns the role name.
func (r Role) String() string { return string(r) }

// rank orders the roles; an unknown or empty role ranks 0, below every real role.
func (r Role) rank() int {
	switch r {
	case RoleOwner:
		return 3
	case RoleAdmin:
		return 2
	case RoleMember:
		return 1
	}
	return 0
}

// AtLeast reports whether r is min or outranks it. It is false when either role is unknown or
// empty, so a missing policy grants nothing.
func (r Role) AtLeast(min Role) bool { return r.rank() > 0 && min.rank() > 0 && r.rank() >= min.rank() }

// Permission is a set of things a member may do in a group, as a bitmask.
type Permission uint32

// The permissions. What a role holds is decided by GroupState.PermissionsOf from the role, the
// group settings and the member's mute.
const (
	PermPost         Permission = 1 << iota // post messages to the group topic
	PermAnnounce                            // set the group announcement
	PermInvite                              // invite users
	PermApprove                             // approve or reject join requests
	PermRemove                              // remove (and ban or unban) members
	PermMute                                // mute and unmute members
	PermEditProfile                         // change the group's name, avatar, intro
	PermEditSettings                        // change join approval, invite and announce policy, mute-all
	PermSetRole                             // make members admins and back
	PermTransfer                            // transfer ownership
	PermDissolve                            // dissolve the group
	PermLeave                               // leave the group
)

var permNames = []string{"post", "announce", "invite", "approve", "remove", "mute",
	"edit_profile", "edit_settings", "set_role", "transfer", "dissolve", "leave"}

// Has reports whether p holds every permission in q.
func (p Permission) Has(q Permission) bool { return p&q == q }

// String lists the permissions as "post|invite"; the empty set is "none".
func (p Permission) String() string {
	var names []string
	for i, n := range permNames {
		if p&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// rolePermissions is what a role holds regardless of settings and mutes.
func rolePermissions(r Role) Permission {
	const member = PermPost | PermLeave
	const admin = member | PermApprove | PermRemove | PermMute | PermEditProfile | PermEditSettings
	switch r {
	case RoleOwner:
		// The owner may not leave: ownership is transferred first.
		return (admin | PermSetRole | PermTransfer | PermDissolve) &^ PermLeave
	case RoleAdmin:
		return admin
	case RoleMember:
		return member
	}
	return 0
}

// PermissionsOf returns what m may do in g at time now: its role's permissions, invite and
// announce as the settings allow, without post and announce while m is muted (never the owner:
// nobody mutes the owner, and a mute from before an ownership transfer is void), and without
// post for plain members under mute-all. Non-members and members of a dissolved group hold
// nothing.
func (g GroupState) PermissionsOf(m MembershipState, now time.Time) Permission {
	if g.dissolved || !g.Exists() || !m.IsMember() || m.group != g.id || m.tenant != g.tenant {
		return 0
	}
	p := g.roleWithSettings(m.role)
	if m.MutedAt(now) && m.role != RoleOwner {
		p &^= PermPost | PermAnnounce
	}
	if g.settings.MuteAll && !m.role.AtLeast(RoleAdmin) {
		p &^= PermPost
	}
	return p
}

func (g GroupState) roleWithSettings(r Role) Permission {
	p := rolePermissions(r)
	if r.AtLeast(g.settings.WhoMayInvite) {
		p |= PermInvite
	}
	if r.AtLeast(g.settings.WhoMayAnnounce) {
		p |= PermAnnounce
	}
	return p
}

// authorize checks that principal p, whose membership is m, may use need in g at now, and
// explains a refusal with the most specific stable reason.
func (g GroupState) authorize(p Principal, m MembershipState, need Permission, now time.Time) error {
	if err := g.check(p); err != nil {
		return err
	}
	if err := m.belongsTo(g, p.User); err != nil {
		return err
	}
	if !m.IsMember() {
		return Deny(ReasonNotMember)
	}
	if g.PermissionsOf(m, now).Has(need) {
		return nil
	}
	switch {
	case need&(PermPost|PermAnnounce) != 0 && m.MutedAt(now) && g.roleWithSettings(m.role).Has(need):
		return Deny(ReasonMuted)
	case need == PermPost && g.settings.MuteAll:
		return Deny(ReasonGroupMuted)
	case need == PermLeave && m.role == RoleOwner:
		return Deny(ReasonOwnerCannotLeave)
	case g.roleWithSettings(RoleAdmin).Has(need):
		return Deny(ReasonNotAdmin)
	default:
		return Deny(ReasonNotOwner)
	}
}

// CanPost reports whether member may post a message to group's topic at now. It returns nil or
// a *DeniedError with reason tenant_mismatch, group_dissolved, not_member, muted (the member's
// mute runs past now) or group_muted (mute-all; the owner and admins are exempt), and
// ErrNotFound for a group that was never created. The send path calls it with the states it
// loaded; it does no I/O.
func CanPost(group GroupState, member MembershipState, now time.Time) error {
	return group.authorize(Principal{Tenant: member.tenant, User: member.user}, member, PermPost, now)
}

// CanAnnounce is CanPost for setting the group announcement: allowed to the roles the group's
// WhoMayAnnounce setting names, never while muted. Reasons as CanPost, plus not_admin and not_owner.
func CanAnnounce(group GroupState, member MembershipState, now time.Time) error {
	return group.authorize(Principal{Tenant: member.tenant, User: member.user}, member, PermAnnounce, now)
}
