package domain

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// DefaultMaxGroupMembers is the member limit used when a join command is given a limit <= 0.
// The real limit comes from configuration.
const DefaultMaxGroupMembers = 10000

// Group text limits, in characters (runes).
const (
	MaxGroupNameLen     = 64
	MaxGroupIntroLen    = 512
	MaxAnnouncementLen  = 2000
	MaxJoinMessageLen   = 256
	MaxAvatarURLLen     = 512 // bytes; avatars are absolute http(s) URLs
	maxGroupIDTextBytes = 32
)

// GroupID is a positive 64-bit group id. Its text form is the decimal number; "grp" + decimal is
// accepted on input. In JSON it is a string.
type GroupID int64

// ParseGroupID parses "123" or "grp123".
func ParseGroupID(s string) (GroupID, error) {
	if s == "" {
		return 0, invalid("group_id", "required", "")
	}
	if len(s) > maxGroupIDTextBytes {
		return 0, invalid("group_id", "bad_format", "a positive 64-bit decimal number")
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(s, "grp"), 10, 64)
	if err != nil || n <= 0 {
		return 0, invalid("group_id", "bad_format", "a positive 64-bit decimal number")
	}
	return GroupID(n), nil
}

// NewGroupID validates n.
func NewGroupID(n int64) (GroupID, error) {
	if n <= 0 {
		return 0, invalid("group_id", "bad_format", "a positive 64-bit number")
	}
	return GroupID(n), nil
}

// String returns the decimal form.
func (g GroupID) String() string { return strconv.FormatInt(int64(g), 10) }

// Int64 returns g as int64.
func (g GroupID) Int64() int64 { return int64(g) }

// Topic returns the group's conversation topic "grp<id>"; it fails for a non-positive id.
func (g GroupID) Topic() (Topic, error) { return GroupTopic(int64(g)) }

// MarshalText implements encoding.TextMarshaler, so JSON carries a string.
func (g GroupID) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText accepts "123" or "grp123".
func (g *GroupID) UnmarshalText(b []byte) error {
	v, err := ParseGroupID(string(b))
	if err != nil {
		return err
	}
	*g = v
	return nil
}

// GroupProfile is a group's public profile: a name (required), an avatar URL and an intro.
type GroupProfile struct {
	name, avatar, intro string
}

// NewGroupProfile validates the profile: name 1..MaxGroupNameLen characters on one line, avatar
// empty or an absolute http(s) URL of at most MaxAvatarURLLen bytes without spaces, intro at most
// MaxGroupIntroLen characters.
func NewGroupProfile(name, avatar, intro string) (GroupProfile, error) {
	if err := checkText("name", name, true, MaxGroupNameLen, false); err != nil {
		return GroupProfile{}, err
	}
	if err := checkAvatar(avatar); err != nil {
		return GroupProfile{}, err
	}
	if err := checkText("intro", intro, false, MaxGroupIntroLen, true); err != nil {
		return GroupProfile{}, err
	}
	return GroupProfile{name: name, avatar: avatar, intro: intro}, nil
}

// Name returns the group name.
func (p GroupProfile) Name() string { return p.name }

// Avatar returns the avatar URL, possibly empty.
func (p GroupProfile) Avatar() string { return p.avatar }

// Intro returns the introduction, possibly empty.
func (p GroupProfile) Intro() string { return p.intro }

// IsZero reports whether p is unset.
func (p GroupProfile) IsZero() bool { return p == GroupProfile{} }

// GroupSettings are a group's rules: whether joins need approval, the lowest role that may
// invite and that may set the announcement, mute-all, and whether search finds it. It is a plain record (it is also the
// event payload); Validate checks it.
type GroupSettings struct {
	JoinApproval   bool `json:"join_approval"`    // joins go through request and approval
	WhoMayInvite   Role `json:"who_may_invite"`   // owner, admin or member
	WhoMayAnnounce Role `json:"who_may_announce"` // owner, admin or member
	MuteAll        bool `json:"mute_all"`         // only the owner and admins may post
	// Discoverable groups are found by name in the tenant's group search. It is left out of
	// the events when false, so the events written before it existed say what they said: not
	// discoverable.
	Discoverable bool `json:"discoverable,omitempty"`
}

// DefaultGroupSettings are the settings of a group created without explicit ones: open to join,
// every member may invite, the owner and admins set the announcement, nobody muted.
func DefaultGroupSettings() GroupSettings {
	return GroupSettings{WhoMayInvite: RoleMember, WhoMayAnnounce: RoleAdmin}
}

// Validate checks that both policies name a role.
func (s GroupSettings) Validate() error {
	if _, err := ParseRole(string(s.WhoMayInvite)); err != nil {
		return invalid("who_may_invite", "unknown", "one of owner, admin, member")
	}
	if _, err := ParseRole(string(s.WhoMayAnnounce)); err != nil {
		return invalid("who_may_announce", "unknown", "one of owner, admin, member")
	}
	return nil
}

// GroupState is a group folded from its stream (GroupStreamID). Build it with NewGroupState and
// Apply, or FoldGroup. Command methods check a rule against the state and return the events to
// append; the state itself changes only in Apply.
type GroupState struct {
	tenant       TenantID
	id           GroupID
	version      int64
	profile      GroupProfile
	settings     GroupSettings
	announcement string
	owner        UserID
	memberCount  int
	dissolved    bool
	createdAt    time.Time
}

// NewGroupState returns the empty state of group id in tenant (no events: the group does not exist yet).
func NewGroupState(tenant TenantID, id GroupID) (GroupState, error) {
	if tenant.IsZero() {
		return GroupState{}, invalid("tenant_id", "required", "")
	}
	if id <= 0 {
		return GroupState{}, invalid("group_id", "bad_format", "a positive 64-bit number")
	}
	return GroupState{tenant: tenant, id: id}, nil
}

// FoldGroup builds the state of group id from its events in stream order.
func FoldGroup(tenant TenantID, id GroupID, events []Envelope) (GroupState, error) {
	g, err := NewGroupState(tenant, id)
	if err != nil {
		return GroupState{}, err
	}
	for _, e := range events {
		if err := g.Apply(e); err != nil {
			return GroupState{}, err
		}
	}
	return g, nil
}

// Apply folds the next event of the group stream into g. It fails with ErrStreamMismatch when
// env is not the next event of this stream or not a group event, and leaves g unchanged then.
func (g *GroupState) Apply(env Envelope) error {
	p, err := decodePayload(env, g.tenant, g.StreamID(), g.version)
	if err != nil {
		return err
	}
	switch e := p.(type) {
	case *GroupCreated:
		g.owner, g.memberCount, g.createdAt = e.Owner, e.MemberCount, e.CreatedAt
		g.profile = GroupProfile{name: e.Name, avatar: e.Avatar, intro: e.Intro}
		g.settings = e.Settings
	case *GroupProfileUpdated:
		g.profile = GroupProfile{name: e.Name, avatar: e.Avatar, intro: e.Intro}
	case *GroupSettingsUpdated:
		g.settings = e.Settings
	case *GroupAnnouncementUpdated:
		g.announcement = e.Text
	case *GroupOwnershipTransferred:
		g.owner = e.To
	case *GroupDissolved:
		g.dissolved = true
	case *GroupMemberCountChanged:
		g.memberCount = e.MemberCount
	default:
		return unknownEvent(g.StreamID(), p)
	}
	g.version = env.StreamVersion
	return nil
}

// Tenant returns the tenant the group belongs to.
func (g GroupState) Tenant() TenantID { return g.tenant }

// ID returns the group id.
func (g GroupState) ID() GroupID { return g.id }

// StreamID returns the group's stream id.
func (g GroupState) StreamID() string { return GroupStreamID(g.id) }

// Version returns the stream version folded so far (0: no events).
func (g GroupState) Version() int64 { return g.version }

// Exists reports whether the group was created.
func (g GroupState) Exists() bool { return g.version > 0 }

// Profile returns the group profile.
func (g GroupState) Profile() GroupProfile { return g.profile }

// Settings returns the group settings.
func (g GroupState) Settings() GroupSettings { return g.settings }

// Announcement returns the current announcement, possibly empty.
func (g GroupState) Announcement() string { return g.announcement }

// Owner returns the owner.
func (g GroupState) Owner() UserID { return g.owner }

// MemberCount returns the number of current members, the owner included.
func (g GroupState) MemberCount() int { return g.memberCount }

// Dissolved reports whether the group was dissolved.
func (g GroupState) Dissolved() bool { return g.dissolved }

// CreatedAt returns when the group was created.
func (g GroupState) CreatedAt() time.Time { return g.createdAt }

// check refuses a principal of another tenant, a group that does not exist (ErrNotFound) and a
// dissolved group.
func (g GroupState) check(p Principal) error {
	switch {
	case p.Tenant != g.tenant:
		return Deny(ReasonTenantMismatch)
	case !g.Exists():
		return fmt.Errorf("group %s: %w", g.id, ErrNotFound)
	case g.dissolved:
		return Deny(ReasonGroupDissolved)
	}
	return nil
}

func (g GroupState) event(typ EventType, payload any) PendingEvent {
	return PendingEvent{StreamID: g.StreamID(), ExpectedVersion: g.version, Type: typ, Payload: payload}
}

// Create decides the creation of the group with p as its owner and first member: group.created.v1
// on the group stream and member.joined.v1 (role owner) on the owner's membership stream.
// Refusals: tenant_mismatch, group_exists; an invalid profile or settings is a *ValidationError.
func (g GroupState) Create(p Principal, profile GroupProfile, settings GroupSettings, now time.Time) ([]PendingEvent, error) {
	if p.Tenant != g.tenant {
		return nil, Deny(ReasonTenantMismatch)
	}
	if g.Exists() {
		return nil, Deny(ReasonGroupExists)
	}
	if p.User <= 0 {
		return nil, invalid("user_id", "bad_format", "a positive 64-bit number")
	}
	if profile.IsZero() {
		return nil, invalid("name", "required", "")
	}
	if err := settings.Validate(); err != nil {
		return nil, err
	}
	now = now.UTC()
	return []PendingEvent{
		g.event(EventGroupCreated, &GroupCreated{GroupID: g.id, Owner: p.User, Name: profile.name,
			Avatar: profile.avatar, Intro: profile.intro, Settings: settings, MemberCount: 1, CreatedAt: now}),
		{StreamID: MembershipStreamID(g.id, p.User), Type: EventMemberJoined, Payload: &MemberJoined{
			GroupID: g.id, User: p.User, Role: RoleOwner, Via: JoinViaCreate, By: p.User, JoinedAt: now}},
	}, nil
}

// UpdateProfile decides group.profile_updated.v1 with the whole new profile. Owner and admins
// only. Refusals: tenant_mismatch, group_dissolved, not_member, not_admin; ErrNotFound for a
// group that does not exist. An unchanged profile decides nothing.
func (g GroupState) UpdateProfile(p Principal, actor MembershipState, profile GroupProfile, now time.Time) ([]PendingEvent, error) {
	if err := g.authorize(p, actor, PermEditProfile, now); err != nil {
		return nil, err
	}
	if profile.IsZero() {
		return nil, invalid("name", "required", "")
	}
	if profile == g.profile {
		return nil, nil
	}
	return []PendingEvent{g.event(EventGroupProfileUpdated, &GroupProfileUpdated{GroupID: g.id,
		Name: profile.name, Avatar: profile.avatar, Intro: profile.intro, By: p.User, UpdatedAt: now.UTC()})}, nil
}

// UpdateSettings decides group.settings_updated.v1 with the whole new settings. Owner and admins
// only (mute-all is routine moderation). Refusals as UpdateProfile; invalid settings are a
// *ValidationError. Unchanged settings decide nothing.
func (g GroupState) UpdateSettings(p Principal, actor MembershipState, settings GroupSettings, now time.Time) ([]PendingEvent, error) {
	if err := g.authorize(p, actor, PermEditSettings, now); err != nil {
		return nil, err
	}
	if err := settings.Validate(); err != nil {
		return nil, err
	}
	if settings == g.settings {
		return nil, nil
	}
	return []PendingEvent{g.event(EventGroupSettingsUpdated, &GroupSettingsUpdated{GroupID: g.id,
		Settings: settings, By: p.User, UpdatedAt: now.UTC()})}, nil
}

// UpdateAnnouncement decides group.announcement_updated.v1; empty text clears the announcement.
// Allowed to the roles WhoMayAnnounce names, never to a muted member. Refusals: tenant_mismatch,
// group_dissolved, not_member, muted, not_admin, not_owner; text longer than MaxAnnouncementLen
// characters is a *ValidationError.
func (g GroupState) UpdateAnnouncement(p Principal, actor MembershipState, text string, now time.Time) ([]PendingEvent, error) {
	if err := g.authorize(p, actor, PermAnnounce, now); err != nil {
		return nil, err
	}
	if err := checkText("announcement", text, false, MaxAnnouncementLen, true); err != nil {
		return nil, err
	}
	return []PendingEvent{g.event(EventGroupAnnouncementUpdated, &GroupAnnouncementUpdated{GroupID: g.id,
		Text: text, By: p.User, UpdatedAt: now.UTC()})}, nil
}

// TransferOwnership decides handing the group to target, a current member: group.ownership_
// transferred.v1 on the group stream, member.role_set.v1 to owner on target's stream and to
// member on the old owner's stream. Nobody mutes the owner, so a mute of target's in force is
// lifted first (member.muted.v2, muted false, on target's stream): nobody could lift it later.
// Owner only. Refusals: tenant_mismatch, group_dissolved, not_member, not_owner, self_action,
// target_not_member.
func (g GroupState) TransferOwnership(p Principal, actor, target MembershipState, now time.Time) ([]PendingEvent, error) {
	if err := g.authorize(p, actor, PermTransfer, now); err != nil {
		return nil, err
	}
	if err := g.checkTarget(actor, target); err != nil {
		return nil, err
	}
	muted := target.MutedAt(now)
	now = now.UTC()
	out := make([]PendingEvent, 0, 4)
	out = append(out, g.event(EventGroupOwnershipTransferred, &GroupOwnershipTransferred{GroupID: g.id,
		From: p.User, To: target.user, TransferredAt: now}))
	if muted {
		out = append(out, target.event(EventMemberMuted, &MemberMuted{GroupID: g.id, User: target.user,
			Muted: false, By: p.User, MutedAt: now}))
	}
	return append(out,
		target.event(EventMemberRoleSet, &MemberRoleSet{GroupID: g.id, User: target.user,
			Role: RoleOwner, By: p.User, SetAt: now}),
		actor.event(EventMemberRoleSet, &MemberRoleSet{GroupID: g.id, User: p.User,
			Role: RoleMember, By: p.User, SetAt: now}),
	), nil
}

// Dissolve decides group.dissolved.v1. Owner only. Refusals: tenant_mismatch, group_dissolved,
// not_member, not_owner.
func (g GroupState) Dissolve(p Principal, actor MembershipState, now time.Time) ([]PendingEvent, error) {
	if err := g.authorize(p, actor, PermDissolve, now); err != nil {
		return nil, err
	}
	return []PendingEvent{g.event(EventGroupDissolved, &GroupDissolved{GroupID: g.id, By: p.User,
		DissolvedAt: now.UTC()})}, nil
}

// checkTarget checks that target is a current member of g other than actor.
func (g GroupState) checkTarget(actor, target MembershipState) error {
	if err := target.belongsTo(g, target.user); err != nil {
		return err
	}
	if target.user == actor.user {
		return Deny(ReasonSelfAction)
	}
	if !target.IsMember() {
		return Deny(ReasonTargetNotMember)
	}
	return nil
}

// checkText validates user-visible text: valid UTF-8, at most max characters, no control
// characters (line breaks allowed when multiline), and not blank when required.
func checkText(field, s string, required bool, max int, multiline bool) error {
	if strings.TrimSpace(s) == "" {
		if required {
			return invalid(field, "required", "")
		}
		if s == "" {
			return nil
		}
	}
	if !utf8.ValidString(s) {
		return invalid(field, "bad_format", "not valid UTF-8")
	}
	if n := utf8.RuneCountInString(s); n > max {
		return invalid(field, "too_long", "at most "+strconv.Itoa(max)+" characters")
	}
	for _, r := range s {
		if unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\r' || r == '\t')) {
			return invalid(field, "bad_format", "control characters are not allowed")
		}
	}
	return nil
}

// checkAvatar validates an optional avatar: empty, or an absolute http or https URL with a host
// (a URL a client may load as an image; javascript:, data: and relative references are refused),
// at most MaxAvatarURLLen bytes without spaces or control characters.
func checkAvatar(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > MaxAvatarURLLen {
		return invalid("avatar", "too_long", "at most "+strconv.Itoa(MaxAvatarURLLen)+" bytes")
	}
	if !utf8.ValidString(s) {
		return invalid("avatar", "bad_format", "not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return invalid("avatar", "bad_format", "no spaces or control characters")
		}
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return invalid("avatar", "bad_format", "an absolute http or https URL")
	}
	return nil
}
