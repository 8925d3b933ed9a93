package domain

import (
	"time"
)

// MembershipStatus is where a user stands with a group. The set is fixed.
type MembershipStatus string

// The membership statuses.
const (
	StatusNone      MembershipStatus = "none"      // never had anything to do with the group
	StatusInvited   MembershipStatus = "invited"   // holds a pending invitation
	StatusRequested MembershipStatus = "requested" // has a pending join request
	StatusRejected  MembershipStatus = "rejected"  // the last join request was rejected
	StatusMember    MembershipStatus = "member"    // a current member
	StatusLeft      MembershipStatus = "left"      // left the group
	StatusRemoved   MembershipStatus = "removed"   // was removed (and maybe banned)
)

// MembershipState is one user's membership in one group, folded from its stream
// (MembershipStreamID). Build it with NewMembershipState and Apply, or FoldMembership; a user who
// never touched the group has the empty state (status none, version 0). Commands that change
// memberships are methods of GroupState, because most rules read both.
type MembershipState struct {
	tenant         TenantID
	group          GroupID
	user           UserID
	version        int64
	status         MembershipStatus
	role           Role
	mutedUntil     time.Time
	banned         bool
	invitedBy      UserID
	requestMessage string
	joinedAt       time.Time
}

// NewMembershipState returns the empty membership of user in group.
func NewMembershipState(tenant TenantID, group GroupID, user UserID) (MembershipState, error) {
	if tenant.IsZero() {
		return MembershipState{}, invalid("tenant_id", "required", "")
	}
	if group <= 0 {
		return MembershipState{}, invalid("group_id", "bad_format", "a positive 64-bit number")
	}
	if user <= 0 {
		return MembershipState{}, invalid("user_id", "bad_format", "a positive 64-bit number")
	}
	return MembershipState{tenant: tenant, group: group, user: user, status: StatusNone}, nil
}

// FoldMembership builds the membership of user in group from its events in stream order.
func FoldMembership(tenant TenantID, group GroupID, user UserID, events []Envelope) (MembershipState, error) {
	m, err := NewMembershipState(tenant, group, user)
	if err != nil {
		return MembershipState{}, err
	}
	for _, e := range events {
		if err := m.Apply(e); err != nil {
			return MembershipState{}, err
		}
	}
	return m, nil
}

// Apply folds the next event of the membership stream into m. It fails with ErrStreamMismatch
// when env is not the next event of this stream or not a membership event, leaving m unchanged.
func (m *MembershipState) Apply(env Envelope) error {
	p, err := decodePayload(env, m.tenant, m.StreamID(), m.version)
	if err != nil {
		return err
	}
	switch e := p.(type) {
	case *MemberInvited:
		m.status, m.invitedBy = StatusInvited, e.By
	case *MemberJoinRequested:
		m.status, m.requestMessage = StatusRequested, e.Message
	case *MemberJoinApproved:
		// The decision record; member.joined.v1 follows and makes the user a member.
	case *MemberJoinRejected:
		m.status, m.requestMessage = StatusRejected, ""
	case *MemberJoined:
		m.status, m.role, m.joinedAt = StatusMember, e.Role, e.JoinedAt
		m.mutedUntil, m.invitedBy, m.requestMessage = time.Time{}, 0, ""
	case *MemberLeft:
		m.status, m.role, m.mutedUntil = StatusLeft, "", time.Time{}
	case *MemberRemoved:
		m.status, m.role, m.mutedUntil, m.banned = StatusRemoved, "", time.Time{}, e.Ban
	case *MemberUnbanned:
		m.banned = false
	case *MemberRoleSet:
		m.role = e.Role
	case *MemberMuted:
		m.mutedUntil = time.Time{}
		if e.Muted {
			m.mutedUntil = e.Until
		}
	default:
		return unknownEvent(m.StreamID(), p)
	}
	m.version = env.StreamVersion
	return nil
}

// Tenant returns the tenant.
func (m MembershipState) Tenant() TenantID { return m.tenant }

// Group returns the group id.
func (m MembershipState) Group() GroupID { return m.group }

// User returns the user.
func (m MembershipState) User() UserID { return m.user }

// StreamID returns the membership's stream id.
func (m MembershipState) StreamID() string { return MembershipStreamID(m.group, m.user) }

// Version returns the stream version folded so far.
func (m MembershipState) Version() int64 { return m.version }

// Status returns where the user stands with the group.
func (m MembershipState) Status() MembershipStatus { return m.status }

// IsMember reports whether the user is a current member. Whether the group still exists is the
// group state's business: members of a dissolved group keep this status.
func (m MembershipState) IsMember() bool { return m.status == StatusMember }

// Role returns the member's role; empty for non-members.
func (m MembershipState) Role() Role { return m.role }

// MutedUntil returns the end of the member's mute; zero when not muted.
func (m MembershipState) MutedUntil() time.Time { return m.mutedUntil }

// MutedAt reports whether the member is muted at now (the mute ends after now).
func (m MembershipState) MutedAt(now time.Time) bool { return m.mutedUntil.After(now) }

// Banned reports whether the user was removed with a ban that is not lifted.
func (m MembershipState) Banned() bool { return m.banned }

// InvitedBy returns who sent the pending invitation; 0 without one.
func (m MembershipState) InvitedBy() UserID { return m.invitedBy }

// RequestMessage returns the message of the pending join request.
func (m MembershipState) RequestMessage() string { return m.requestMessage }

// JoinedAt returns when the user last joined.
func (m MembershipState) JoinedAt() time.Time { return m.joinedAt }

// belongsTo checks that m is the membership of user in g: another tenant is tenant_mismatch,
// another group or user a *ValidationError (the caller loaded the wrong stream).
func (m MembershipState) belongsTo(g GroupState, user UserID) error {
	if m.tenant != g.tenant {
		return Deny(ReasonTenantMismatch)
	}
	if m.group != g.id || m.user != user {
		return invalid("membership", "mismatch", "the membership state of another group or user")
	}
	return nil
}

func (m MembershipState) event(typ EventType, payload any) PendingEvent {
	return PendingEvent{StreamID: m.StreamID(), ExpectedVersion: m.version, Type: typ, Payload: payload}
}

// countChanged is the group-stream half of a join, leave or removal (see GroupMemberCountChanged).
func (g GroupState) countChanged(user UserID, change string, delta int, now time.Time) PendingEvent {
	return g.event(EventGroupMemberCountChanged, &GroupMemberCountChanged{GroupID: g.id, User: user,
		Change: change, MemberCount: g.memberCount + delta, ChangedAt: now})
}

// joinable refuses a user who may not come in at all: already a member, or banned.
func (m MembershipState) joinable() error {
	if m.IsMember() {
		return Deny(ReasonAlreadyMember)
	}
	if m.banned {
		return Deny(ReasonBanned)
	}
	return nil
}

// admit decides the events that make m a member: member.joined.v1 (after any extra events of
// the membership stream) and the group's count change. It refuses group_full.
func (g GroupState) admit(m MembershipState, via string, by UserID, maxMembers int, now time.Time, extra ...PendingEvent) ([]PendingEvent, error) {
	if maxMembers <= 0 {
		maxMembers = DefaultMaxGroupMembers
	}
	if g.memberCount >= maxMembers {
		return nil, Deny(ReasonGroupFull)
	}
	now = now.UTC()
	out := make([]PendingEvent, 0, len(extra)+2)
	out = append(out, extra...)
	out = append(out, m.event(EventMemberJoined, &MemberJoined{GroupID: g.id, User: m.user,
		Role: RoleMember, Via: via, By: by, JoinedAt: now}))
	return append(out, g.countChanged(m.user, CountJoined, +1, now)), nil
}

// Invite decides member.invited.v1 for target, allowed to the roles WhoMayInvite names.
// Refusals: tenant_mismatch, group_dissolved, not_member, not_admin, not_owner (actor side);
// already_member, banned (target side).
func (g GroupState) Invite(p Principal, actor, target MembershipState, now time.Time) ([]PendingEvent, error) {
	if err := g.authorize(p, actor, PermInvite, now); err != nil {
		return nil, err
	}
	if err := target.belongsTo(g, target.user); err != nil {
		return nil, err
	}
	if err := target.joinable(); err != nil {
		return nil, err
	}
	return []PendingEvent{target.event(EventMemberInvited, &MemberInvited{GroupID: g.id, User: target.user,
		By: p.User, InvitedAt: now.UTC()})}, nil
}

// Join decides p joining g directly: allowed when the group needs no approval or p holds an
// invitation (then it is AcceptInvite). maxMembers <= 0 means DefaultMaxGroupMembers.
// Refusals: tenant_mismatch, group_dissolved, already_member, banned, approval_required,
// group_full; ErrNotFound for a group that does not exist.
func (g GroupState) Join(p Principal, m MembershipState, maxMembers int, now time.Time) ([]PendingEvent, error) {
	if err := g.checkJoiner(p, m); err != nil {
		return nil, err
	}
	if m.status == StatusInvited {
		return g.admit(m, JoinViaInvite, m.invitedBy, maxMembers, now)
	}
	if g.settings.JoinApproval {
		return nil, Deny(ReasonApprovalRequired)
	}
	return g.admit(m, JoinViaDirect, p.User, maxMembers, now)
}

// AcceptInvite decides p joining g on its pending invitation, with or without join approval.
// Refusals: tenant_mismatch, group_dissolved, already_member, banned, not_invited, group_full.
func (g GroupState) AcceptInvite(p Principal, m MembershipState, maxMembers int, now time.Time) ([]PendingEvent, error) {
	if err := g.checkJoiner(p, m); err != nil {
		return nil, err
	}
	if m.status != StatusInvited {
		return nil, Deny(ReasonNotInvited)
	}
	return g.admit(m, JoinViaInvite, m.invitedBy, maxMembers, now)
}

// JoinOnLink decides p joining g on an invite link (a join_group action token) that inviter
// issued: an invitation of inviter's, so it admits p with or without join approval while inviter
// is still a member whose role may invite. Refusals: tenant_mismatch, group_dissolved,
// already_member, banned, group_full (joiner side); not_member, not_admin, not_owner (inviter
// side: the link died with the inviter's right to invite).
func (g GroupState) JoinOnLink(p Principal, m, inviter MembershipState, maxMembers int, now time.Time) ([]PendingEvent, error) {
	if err := g.checkJoiner(p, m); err != nil {
		return nil, err
	}
	if err := g.MayInvite(Principal{Tenant: p.Tenant, User: inviter.user}, inviter, now); err != nil {
		return nil, err
	}
	return g.admit(m, JoinViaInvite, inviter.user, maxMembers, now)
}

// MayInvite reports whether actor, p's membership, may invite users into g at now: nil, or the
// refusal Invite would give (tenant_mismatch, group_dissolved, not_member, not_admin, not_owner).
func (g GroupState) MayInvite(p Principal, actor MembershipState, now time.Time) error {
	return g.authorize(p, actor, PermInvite, now)
}

// RequestJoin decides member.join_requested.v1 for a group that needs approval; a pending
// request is replaced. Refusals: tenant_mismatch, group_dissolved, already_member, banned,
// approval_not_required; a message over MaxJoinMessageLen characters is a *ValidationError.
func (g GroupState) RequestJoin(p Principal, m MembershipState, message string, now time.Time) ([]PendingEvent, error) {
	if err := g.checkJoiner(p, m); err != nil {
		return nil, err
	}
	if !g.settings.JoinApproval {
		return nil, Deny(ReasonApprovalNotRequired)
	}
	if err := checkText("message", message, false, MaxJoinMessageLen, true); err != nil {
		return nil, err
	}
	return []PendingEvent{m.event(EventMemberJoinRequested, &MemberJoinRequested{GroupID: g.id, User: p.User,
		Message: message, RequestedAt: now.UTC()})}, nil
}

func (g GroupState) checkJoiner(p Principal, m MembershipState) error {
	if err := g.check(p); err != nil {
		return err
	}
	if err := m.belongsTo(g, p.User); err != nil {
		return err
	}
	return m.joinable()
}

// ApproveJoin decides member.join_approved.v1 and member.joined.v1 on target's stream plus the
// group's count change. Owner and admins only. Refusals: tenant_mismatch, group_dissolved,
// not_member, not_admin, no_pending_request, group_full.
func (g GroupState) ApproveJoin(p Principal, actor, target MembershipState, maxMembers int, now time.Time) ([]PendingEvent, error) {
	if err := g.decidable(p, actor, target, now); err != nil {
		return nil, err
	}
	approved := target.event(EventMemberJoinApproved, &MemberJoinApproved{GroupID: g.id, User: target.user,
		By: p.User, ApprovedAt: now.UTC()})
	return g.admit(target, JoinViaApproval, p.User, maxMembers, now, approved)
}

// RejectJoin decides member.join_rejected.v1. Refusals as ApproveJoin, without group_full.
func (g GroupState) RejectJoin(p Principal, actor, target MembershipState, now time.Time) ([]PendingEvent, error) {
	if err := g.decidable(p, actor, target, now); err != nil {
		return nil, err
	}
	return []PendingEvent{target.event(EventMemberJoinRejected, &MemberJoinRejected{GroupID: g.id,
		User: target.user, By: p.User, RejectedAt: now.UTC()})}, nil
}

func (g GroupState) decidable(p Principal, actor, target MembershipState, now time.Time) error {
	if err := g.authorize(p, actor, PermApprove, now); err != nil {
		return err
	}
	if err := target.belongsTo(g, target.user); err != nil {
		return err
	}
	if target.status != StatusRequested {
		return Deny(ReasonNoPendingRequest)
	}
	return nil
}

// Leave decides member.left.v1 and the group's count change. Refusals: tenant_mismatch,
// group_dissolved, not_member, owner_cannot_leave.
func (g GroupState) Leave(p Principal, m MembershipState, now time.Time) ([]PendingEvent, error) {
	if err := g.authorize(p, m, PermLeave, now); err != nil {
		return nil, err
	}
	now = now.UTC()
	return []PendingEvent{
		m.event(EventMemberLeft, &MemberLeft{GroupID: g.id, User: p.User, LeftAt: now}),
		g.countChanged(p.User, CountLeft, -1, now),
	}, nil
}

// Remove decides member.removed.v1 (with ban: the user may not come back until Unban) and the
// group's count change. The owner removes anyone else; an admin removes plain members only.
// Refusals: tenant_mismatch, group_dissolved, not_member, not_admin, self_action,
// target_not_member, cannot_remove_owner, cannot_remove_admin.
func (g GroupState) Remove(p Principal, actor, target MembershipState, ban bool, now time.Time) ([]PendingEvent, error) {
	if err := g.authorize(p, actor, PermRemove, now); err != nil {
		return nil, err
	}
	if err := g.checkTarget(actor, target); err != nil {
		return nil, err
	}
	switch {
	case target.role == RoleOwner:
		return nil, Deny(ReasonCannotRemoveOwner)
	case target.role == RoleAdmin && actor.role != RoleOwner:
		return nil, Deny(ReasonCannotRemoveAdmin)
	}
	now = now.UTC()
	return []PendingEvent{
		target.event(EventMemberRemoved, &MemberRemoved{GroupID: g.id, User: target.user, By: p.User,
			Ban: ban, RemovedAt: now}),
		g.countChanged(target.user, CountRemoved, -1, now),
	}, nil
}

// Unban decides member.unbanned.v1 for a banned user. Owner and admins only. Refusals:
// tenant_mismatch, group_dissolved, not_member, not_admin, not_banned.
func (g GroupState) Unban(p Principal, actor, target MembershipState, now time.Time) ([]PendingEvent, error) {
	if err := g.authorize(p, actor, PermRemove, now); err != nil {
		return nil, err
	}
	if err := target.belongsTo(g, target.user); err != nil {
		return nil, err
	}
	if !target.banned {
		return nil, Deny(ReasonNotBanned)
	}
	return []PendingEvent{target.event(EventMemberUnbanned, &MemberUnbanned{GroupID: g.id, User: target.user,
		By: p.User, UnbannedAt: now.UTC()})}, nil
}

// SetRole decides member.role_set.v1 making target an admin or a plain member (ownership moves
// only by TransferOwnership; role owner is a *ValidationError). Owner only. Refusals:
// tenant_mismatch, group_dissolved, not_member, not_owner, self_action, target_not_member.
// Setting the role target already has decides nothing.
func (g GroupState) SetRole(p Principal, actor, target MembershipState, role Role, now time.Time) ([]PendingEvent, error) {
	if err := g.authorize(p, actor, PermSetRole, now); err != nil {
		return nil, err
	}
	if role != RoleAdmin && role != RoleMember {
		return nil, invalid("role", "bad_value", "admin or member; ownership is transferred")
	}
	if err := g.checkTarget(actor, target); err != nil {
		return nil, err
	}
	if target.role == role {
		return nil, nil
	}
	return []PendingEvent{target.event(EventMemberRoleSet, &MemberRoleSet{GroupID: g.id, User: target.user,
		Role: role, By: p.User, SetAt: now.UTC()})}, nil
}

// Mute decides member.muted.v1: target may not post before until; a zero until lifts the mute.
// The owner mutes anyone else; an admin mutes plain members only. Refusals: tenant_mismatch,
// group_dissolved, not_member, not_admin, self_action, target_not_member, cannot_mute_owner,
// cannot_mute_admin; a non-zero until not after now is a *ValidationError. Lifting a mute that
// is not in force decides nothing.
func (g GroupState) Mute(p Principal, actor, target MembershipState, until, now time.Time) ([]PendingEvent, error) {
	if err := g.authorize(p, actor, PermMute, now); err != nil {
		return nil, err
	}
	if err := g.checkTarget(actor, target); err != nil {
		return nil, err
	}
	switch {
	case target.role == RoleOwner:
		return nil, Deny(ReasonCannotMuteOwner)
	case target.role == RoleAdmin && actor.role != RoleOwner:
		return nil, Deny(ReasonCannotMuteAdmin)
	case !until.IsZero() && !until.After(now):
		return nil, invalid("until", "in_past", "a mute must end after now; zero lifts it")
	case until.IsZero() && !target.MutedAt(now):
		return nil, nil
	}
	if !until.IsZero() {
		until = until.UTC()
	}
	return []PendingEvent{target.event(EventMemberMuted, &MemberMuted{GroupID: g.id, User: target.user,
		Muted: !until.IsZero(), Until: until, By: p.User, MutedAt: now.UTC()})}, nil
}
