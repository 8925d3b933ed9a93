package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Business event types of groups and memberships (Category business, topic im.business.event).
// Names are a wire contract: never renamed; a changed payload gets a new version.
const (
	EventGroupCreated              EventType = "group.created.v1"
	EventGroupProfileUpdated       EventType = "group.profile_updated.v1"
	EventGroupSettingsUpdated      EventType = "group.settings_updated.v1"
	EventGroupAnnouncementUpdated  EventType = "group.announcement_updated.v1"
	EventGroupOwnershipTransferred EventType = "group.ownership_transferred.v1"
	EventGroupDissolved            EventType = "group.dissolved.v1"
	EventGroupMemberCountChanged   EventType = "group.member_count_changed.v1"

	EventMemberInvited       EventType = "member.invited.v1"
	EventMemberJoinRequested EventType = "member.join_requested.v1"
	EventMemberJoinApproved  EventType = "member.join_approved.v1"
	EventMemberJoinRejected  EventType = "member.join_rejected.v1"
	EventMemberJoined        EventType = "member.joined.v1"
	EventMemberLeft          EventType = "member.left.v1"
	EventMemberRemoved       EventType = "member.removed.v1"
	EventMemberUnbanned      EventType = "member.unbanned.v1"
	EventMemberRoleSet       EventType = "member.role_set.v1"
	// EventMemberMuted is version 2 of member.muted: it says whether the event mutes or lifts a
	// mute. Version 1 (EventMemberMutedV1) said it only by leaving until out; it is upcast on read.
	EventMemberMuted EventType = "member.muted.v2"
)

// Biz types of the business events (the envelope biz_type field).
const (
	BizTypeGroup    = "group"
	BizTypeMember   = "group_member"
	BizTypeRelation = "relation"
	BizTypeUser     = "user"
)

// ErrStreamMismatch means an event does not fit the aggregate it was applied to: another tenant
// or stream, a stream version that is not the next one, or an event type the aggregate does not
// know. It points at a bug or a corrupted read, never at bad user input.
var ErrStreamMismatch = errors.New("event does not fit the stream")

// Stream ids (DESIGN §4). Each aggregate has its own stream, so a join into a large group appends
// to one small membership stream plus the group stream, never to a stream of all members.

// GroupStreamID is the stream of a group's profile, settings, ownership, dissolution and
// member count: "group:<gid>".
func GroupStreamID(g GroupID) string { return "group:" + g.String() }

// MembershipStreamID is the stream of one user's membership in one group: "member:<gid>:<uid>".
func MembershipStreamID(g GroupID, u UserID) string {
	return "member:" + g.String() + ":" + u.String()
}

// PendingEvent is an event a command decided on and that is not stored yet. The events of one
// decision may span several streams; they must be appended in one transaction, each stream
// checked against its ExpectedVersion, or not at all. Events of the same stream within a
// decision are consecutive: the first goes to ExpectedVersion+1, the next to +2, and so on.
type PendingEvent struct {
	StreamID        string    // the stream the event is appended to
	ExpectedVersion int64     // the stream's version when the decision was made (0: empty stream)
	Type            EventType // a registered event type
	Payload         any       // the payload struct of Type
}

// NewEnvelopes turns a decision into envelopes for tenant, caused by actor, with consecutive
// stream versions per stream as PendingEvent describes. It fails with ErrInvalid for an
// unregistered type or for one stream named with two different expected versions.
func NewEnvelopes(tenant TenantID, actor Actor, events []PendingEvent) ([]Envelope, error) {
	next := make(map[string]int64, len(events))
	base := make(map[string]int64, len(events))
	out := make([]Envelope, 0, len(events))
	for _, e := range events {
		if b, seen := base[e.StreamID]; seen && b != e.ExpectedVersion {
			return nil, invalid("expected_version", "conflict", e.StreamID+" named with two expected versions")
		}
		base[e.StreamID] = e.ExpectedVersion
		v, seen := next[e.StreamID]
		if !seen {
			v = e.ExpectedVersion + 1
		}
		next[e.StreamID] = v + 1
		env, err := NewEnvelope(tenant, e.StreamID, v, e.Type, actor, e.Payload)
		if err != nil {
			return nil, fmt.Errorf("envelope %s: %w", e.Type, err)
		}
		out = append(out, env)
	}
	return out, nil
}

// decodePayload checks that env is the next event of the stream (tenant, id, version) and decodes
// its payload, upcast to the current version, through the event registry.
func decodePayload(env Envelope, tenant TenantID, streamID string, version int64) (any, error) {
	env, err := Upcast(env)
	if err != nil {
		return nil, err
	}
	switch {
	case env.TenantID != tenant:
		return nil, fmt.Errorf("%w: tenant %q, want %q", ErrStreamMismatch, env.TenantID.String(), tenant.String())
	case env.StreamID != streamID:
		return nil, fmt.Errorf("%w: stream %q, want %q", ErrStreamMismatch, env.StreamID, streamID)
	case env.StreamVersion != version+1:
		return nil, fmt.Errorf("%w: %s version %d, want %d", ErrStreamMismatch, streamID, env.StreamVersion, version+1)
	}
	info, ok := LookupEventType(env.EventType)
	if !ok {
		return nil, fmt.Errorf("%w: unknown event type %s", ErrStreamMismatch, env.EventType)
	}
	p := info.Payload()
	if err := json.Unmarshal(env.Payload, p); err != nil {
		return nil, fmt.Errorf("decode %s payload: %w", env.EventType, err)
	}
	return p, nil
}

func unknownEvent(streamID string, p any) error {
	return fmt.Errorf("%w: %s does not take %T", ErrStreamMismatch, streamID, p)
}

// GroupCreated is the payload of group.created.v1 (group stream, version 1). The owner is the
// first member; its member.joined.v1 is appended in the same transaction.
type GroupCreated struct {
	GroupID     GroupID       `json:"group_id"`
	Owner       UserID        `json:"owner"`
	Name        string        `json:"name"`
	Avatar      string        `json:"avatar,omitempty"`
	Intro       string        `json:"intro,omitempty"`
	Settings    GroupSettings `json:"settings"`
	MemberCount int           `json:"member_count"`
	CreatedAt   time.Time     `json:"created_at"`
}

// GroupProfileUpdated is the payload of group.profile_updated.v1: the whole new profile.
type GroupProfileUpdated struct {
	GroupID   GroupID   `json:"group_id"`
	Name      string    `json:"name"`
	Avatar    string    `json:"avatar,omitempty"`
	Intro     string    `json:"intro,omitempty"`
	By        UserID    `json:"by"`
	UpdatedAt time.Time `json:"updated_at"`
}

// GroupSettingsUpdated is the payload of group.settings_updated.v1: the whole new settings.
type GroupSettingsUpdated struct {
	GroupID   GroupID       `json:"group_id"`
	Settings  GroupSettings `json:"settings"`
	By        UserID        `json:"by"`
	UpdatedAt time.Time     `json:"updated_at"`
}

// GroupAnnouncementUpdated is the payload of group.announcement_updated.v1; an empty Text clears
// the announcement.
type GroupAnnouncementUpdated struct {
	GroupID   GroupID   `json:"group_id"`
	Text      string    `json:"text"`
	By        UserID    `json:"by"`
	UpdatedAt time.Time `json:"updated_at"`
}

// GroupOwnershipTransferred is the payload of group.ownership_transferred.v1. The same decision
// appends member.role_set.v1 to both members' streams (To becomes owner, From a member).
type GroupOwnershipTransferred struct {
	GroupID       GroupID   `json:"group_id"`
	From          UserID    `json:"from"`
	To            UserID    `json:"to"`
	TransferredAt time.Time `json:"transferred_at"`
}

// GroupDissolved is the payload of group.dissolved.v1. Membership streams are not touched (that
// would cost one event per member); a dissolved group refuses every command and every post, and
// read models drop its members when they project this event.
type GroupDissolved struct {
	GroupID     GroupID   `json:"group_id"`
	By          UserID    `json:"by"`
	DissolvedAt time.Time `json:"dissolved_at"`
}

// Member count changes carried by GroupMemberCountChanged.Change.
const (
	CountJoined  = "joined"
	CountLeft    = "left"
	CountRemoved = "removed"
)

// GroupMemberCountChanged is the payload of group.member_count_changed.v1, appended to the group
// stream in the same transaction as every member.joined.v1, member.left.v1 and member.removed.v1.
// MemberCount is the count after the change.
//
// Why the group stream carries the count: the member limit is a rule over all memberships of a
// group, and membership streams are per user so that a join stays O(1). Appending the count
// change to the group stream with the group's expected version makes the group stream version
// the serialisation point of joins: of 200 concurrent joins against a group at version N, one
// commits N+1 and the other 199 fail with ErrConcurrency, reload, and decide again against the
// new count — so with a limit of 150 exactly 150 joins succeed and the rest are refused
// group_full. Leaves and removals go through the group stream too, so the count is always the
// fold of the stream and never drifts. Profile and settings changes share the stream; they are
// rare, and a join that loses to one simply retries.
type GroupMemberCountChanged struct {
	GroupID     GroupID   `json:"group_id"`
	User        UserID    `json:"user"`
	Change      string    `json:"change"`
	MemberCount int       `json:"member_count"`
	ChangedAt   time.Time `json:"changed_at"`
}

// MemberInvited is the payload of member.invited.v1: User holds a pending invitation from By.
type MemberInvited struct {
	GroupID   GroupID   `json:"group_id"`
	User      UserID    `json:"user"`
	By        UserID    `json:"by"`
	InvitedAt time.Time `json:"invited_at"`
}

// MemberJoinRequested is the payload of member.join_requested.v1 (groups that need approval).
type MemberJoinRequested struct {
	GroupID     GroupID   `json:"group_id"`
	User        UserID    `json:"user"`
	Message     string    `json:"message,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
}

// MemberJoinApproved is the payload of member.join_approved.v1; member.joined.v1 follows it in
// the same stream and decision.
type MemberJoinApproved struct {
	GroupID    GroupID   `json:"group_id"`
	User       UserID    `json:"user"`
	By         UserID    `json:"by"`
	ApprovedAt time.Time `json:"approved_at"`
}

// MemberJoinRejected is the payload of member.join_rejected.v1: the request is gone; the user
// may ask again.
type MemberJoinRejected struct {
	GroupID    GroupID   `json:"group_id"`
	User       UserID    `json:"user"`
	By         UserID    `json:"by"`
	RejectedAt time.Time `json:"rejected_at"`
}

// How a member came in, carried by MemberJoined.Via.
const (
	JoinViaCreate   = "create"   // the owner, when the group was created
	JoinViaDirect   = "direct"   // joined a group that needs no approval
	JoinViaInvite   = "invite"   // accepted an invitation
	JoinViaApproval = "approval" // a join request was approved
)

// MemberJoined is the payload of member.joined.v1: from now on User is a member with Role.
// By is who let the user in (the inviter or approver; the user for direct joins).
type MemberJoined struct {
	GroupID  GroupID   `json:"group_id"`
	User     UserID    `json:"user"`
	Role     Role      `json:"role"`
	Via      string    `json:"via"`
	By       UserID    `json:"by"`
	JoinedAt time.Time `json:"joined_at"`
}

// MemberLeft is the payload of member.left.v1.
type MemberLeft struct {
	GroupID GroupID   `json:"group_id"`
	User    UserID    `json:"user"`
	LeftAt  time.Time `json:"left_at"`
}

// MemberRemoved is the payload of member.removed.v1. With Ban the user may not join, request or
// be invited again until member.unbanned.v1.
type MemberRemoved struct {
	GroupID   GroupID   `json:"group_id"`
	User      UserID    `json:"user"`
	By        UserID    `json:"by"`
	Ban       bool      `json:"ban,omitempty"`
	RemovedAt time.Time `json:"removed_at"`
}

// MemberUnbanned is the payload of member.unbanned.v1: the ban of a removed user is lifted.
type MemberUnbanned struct {
	GroupID    GroupID   `json:"group_id"`
	User       UserID    `json:"user"`
	By         UserID    `json:"by"`
	UnbannedAt time.Time `json:"unbanned_at"`
}

// MemberRoleSet is the payload of member.role_set.v1.
type MemberRoleSet struct {
	GroupID GroupID   `json:"group_id"`
	User    UserID    `json:"user"`
	Role    Role      `json:"role"`
	By      UserID    `json:"by"`
	SetAt   time.Time `json:"set_at"`
}

// MemberMuted is the payload of member.muted.v2. With Muted true, User may not post before
// Until; with Muted false the event lifts User's mute and Until is absent. Version 1
// (MemberMutedV1) had no Muted field: a v1 event without until was a lift, which a reader had
// to know, and which a reader that did not know took for a mute without end.
type MemberMuted struct {
	GroupID GroupID   `json:"group_id"`
	User    UserID    `json:"user"`
	Muted   bool      `json:"muted"`
	Until   time.Time `json:"until,omitzero"`
	By      UserID    `json:"by"`
	MutedAt time.Time `json:"muted_at"`
}
