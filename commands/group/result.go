package group

import (
	"context"
	"sort"

	"github.com/imledger/imledger/domain"
)

// Result is what a command did. It is returned only after its events are committed.
type Result struct {
	// Group is the group acted on; for CreateGroup the new group's id. 0 for relation and
	// profile commands.
	Group domain.GroupID
	// Topic is the conversation the change concerns: the group topic, or for relation commands
	// the two users' 1:1 topic. Zero for profile commands.
	Topic domain.Topic
	// Versions are the written streams' versions after the command, sorted by stream id.
	Versions []StreamVersion
	// Changes are the changes to tell online clients about, in event order.
	Changes []Change
	// Unchanged is true when the state already was what the command asked (an unchanged
	// profile, a mute lifted that was not in force): nothing was written.
	Unchanged bool
}

// StreamVersion is a stream's version after a command.
type StreamVersion struct {
	StreamID string
	Version  int64
}

// ChangeKind names a change the realtime layer reacts to. The set is fixed; names are stable.
type ChangeKind string

// Group changes (Notifier.GroupChanged).
const (
	ChangeGroupCreated  ChangeKind = "group_created"
	ChangeGroupProfile  ChangeKind = "group_profile"
	ChangeGroupSettings ChangeKind = "group_settings"
	ChangeAnnouncement  ChangeKind = "announcement"
	ChangeOwner         ChangeKind = "owner"     // ownership moved; role changes follow
	ChangeDissolved     ChangeKind = "dissolved" // drop every subscription to the topic
)

// Membership changes (Notifier.MembershipChanged).
const (
	ChangeInvited       ChangeKind = "invited"
	ChangeJoinRequested ChangeKind = "join_requested"
	ChangeJoinRejected  ChangeKind = "join_rejected"
	ChangeJoined        ChangeKind = "joined"
	ChangeLeft          ChangeKind = "left"    // drop the user's subscription
	ChangeRemoved       ChangeKind = "removed" // drop the user's subscription (with or without ban)
	ChangeUnbanned      ChangeKind = "unbanned"
	ChangeRoleSet       ChangeKind = "role_set"
	ChangeMuted         ChangeKind = "muted"
	ChangeUnmuted       ChangeKind = "unmuted"
)

// Relation changes (Notifier.RelationChanged).
const (
	ChangeFriendRequested ChangeKind = "friend_requested"
	ChangeFriendAccepted  ChangeKind = "friend_accepted"
	ChangeFriendDeclined  ChangeKind = "friend_declined"
	ChangeFriendRemoved   ChangeKind = "friend_removed"
	ChangeBlocked         ChangeKind = "blocked"
	ChangeUnblocked       ChangeKind = "unblocked"
)

// ChangeProfile is a user's public profile change (Notifier.ProfileChanged).
const ChangeProfile ChangeKind = "profile"

// Change is one committed change. Which fields are set depends on Kind: group changes set
// Group; membership changes Group and User (the member); relation changes User (who acted) and
// Peer; profile changes User.
type Change struct {
	Kind  ChangeKind
	Group domain.GroupID
	User  domain.UserID
	Peer  domain.UserID
	By    domain.UserID // who caused it
	Role  domain.Role   // the member's new role, for ChangeRoleSet
}

// Notifier is told about committed changes so online sessions hear of them at once: transport
// pushes info/pres frames, refreshes a topic's per-user permissions and drops the subscription
// of a user who left, was removed, or whose group was dissolved. It is called after the commit,
// synchronously and best effort: it returns nothing, must not block for long, and a notification
// it loses is repaired by clients catching up from the read models.
type Notifier interface {
	// GroupChanged reports a change of the group itself.
	GroupChanged(ctx context.Context, tenant domain.TenantID, group domain.GroupID, change ChangeKind)
	// MembershipChanged reports a change of user's membership in group.
	MembershipChanged(ctx context.Context, tenant domain.TenantID, group domain.GroupID, user domain.UserID, change ChangeKind)
	// RelationChanged reports a change between two users; a is the one who acted.
	RelationChanged(ctx context.Context, tenant domain.TenantID, a, b domain.UserID, change ChangeKind)
	// ProfileChanged reports that user's public profile changed.
	ProfileChanged(ctx context.Context, tenant domain.TenantID, user domain.UserID)
}

// ChangeListener hears every command's committed changes whole, who made each included, after
// the Invalidator and the Notifier (transport/userchan logs them on the per-user channels of the
// users they concern). It is called synchronously after the commit, with a context that ignores
// the caller's cancellation, and is best effort: it returns nothing and must not block for long.
type ChangeListener interface {
	ChangesCommitted(ctx context.Context, tenant domain.TenantID, changes []Change)
}

// Invalidator is told which streams a command wrote, after the commit, so caches of folded
// states (the send-path policy's) stop trusting what they hold. Invalidate must not block on
// I/O for long; it returns nothing (a lost invalidation is bounded by the caches' TTL).
type Invalidator interface {
	Invalidate(ctx context.Context, tenant domain.TenantID, streamIDs []string)
}

// Invalidators invalidates through each of its members in order: typically this node's policy
// first, then a publisher that tells the other nodes.
type Invalidators []Invalidator

// Invalidate calls every member.
func (s Invalidators) Invalidate(ctx context.Context, tenant domain.TenantID, streamIDs []string) {
	for _, i := range s {
		i.Invalidate(ctx, tenant, streamIDs)
	}
}

// nopNotifier is the default Notifier.
type nopNotifier struct{}

func (nopNotifier) GroupChanged(context.Context, domain.TenantID, domain.GroupID, ChangeKind) {}
func (nopNotifier) MembershipChanged(context.Context, domain.TenantID, domain.GroupID, domain.UserID, ChangeKind) {
}
func (nopNotifier) RelationChanged(context.Context, domain.TenantID, domain.UserID, domain.UserID, ChangeKind) {
}
func (nopNotifier) ProfileChanged(context.Context, domain.TenantID, domain.UserID) {}

// versionsOf returns each stream's last version among envs, sorted by stream id.
func versionsOf(envs []domain.Envelope) []StreamVersion {
	last := make(map[string]int64, 3)
	for _, e := range envs {
		last[e.StreamID] = max(last[e.StreamID], e.StreamVersion)
	}
	out := make([]StreamVersion, 0, len(last))
	for id, v := range last {
		out = append(out, StreamVersion{StreamID: id, Version: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StreamID < out[j].StreamID })
	return out
}

// changesOf derives the changes of committed events from their payloads. Events nobody online
// needs to hear about (member counts, the approval record before a join) give none.
func changesOf(events []domain.PendingEvent) []Change {
	out := make([]Change, 0, len(events))
	for _, e := range events {
		if c, ok := changeOf(e.Payload); ok {
			out = append(out, c)
		}
	}
	return out
}

func changeOf(p any) (Change, bool) {
	if c, ok := groupChange(p); ok {
		return c, true
	}
	if c, ok := memberChange(p); ok {
		return c, true
	}
	return otherChange(p)
}

func groupChange(p any) (Change, bool) {
	switch e := p.(type) {
	case *domain.GroupCreated:
		return Change{Kind: ChangeGroupCreated, Group: e.GroupID, By: e.Owner}, true
	case *domain.GroupProfileUpdated:
		return Change{Kind: ChangeGroupProfile, Group: e.GroupID, By: e.By}, true
	case *domain.GroupSettingsUpdated:
		return Change{Kind: ChangeGroupSettings, Group: e.GroupID, By: e.By}, true
	case *domain.GroupAnnouncementUpdated:
		return Change{Kind: ChangeAnnouncement, Group: e.GroupID, By: e.By}, true
	case *domain.GroupOwnershipTransferred:
		return Change{Kind: ChangeOwner, Group: e.GroupID, User: e.To, By: e.From}, true
	case *domain.GroupDissolved:
		return Change{Kind: ChangeDissolved, Group: e.GroupID, By: e.By}, true
	}
	return Change{}, false
}

func memberChange(p any) (Change, bool) {
	switch e := p.(type) {
	case *domain.MemberInvited:
		return Change{Kind: ChangeInvited, Group: e.GroupID, User: e.User, By: e.By}, true
	case *domain.MemberJoinRequested:
		return Change{Kind: ChangeJoinRequested, Group: e.GroupID, User: e.User, By: e.User}, true
	case *domain.MemberJoinRejected:
		return Change{Kind: ChangeJoinRejected, Group: e.GroupID, User: e.User, By: e.By}, true
	case *domain.MemberJoined:
		return Change{Kind: ChangeJoined, Group: e.GroupID, User: e.User, By: e.By}, true
	case *domain.MemberLeft:
		return Change{Kind: ChangeLeft, Group: e.GroupID, User: e.User, By: e.User}, true
	case *domain.MemberRemoved:
		return Change{Kind: ChangeRemoved, Group: e.GroupID, User: e.User, By: e.By}, true
	case *domain.MemberUnbanned:
		return Change{Kind: ChangeUnbanned, Group: e.GroupID, User: e.User, By: e.By}, true
	case *domain.MemberRoleSet:
		return Change{Kind: ChangeRoleSet, Group: e.GroupID, User: e.User, By: e.By, Role: e.Role}, true
	case *domain.MemberMuted:
		kind := ChangeMuted
		if !e.Muted {
			kind = ChangeUnmuted
		}
		return Change{Kind: kind, Group: e.GroupID, User: e.User, By: e.By}, true
	}
	return Change{}, false
}

func otherChange(p any) (Change, bool) {
	switch e := p.(type) {
	case *domain.FriendRequested:
		return Change{Kind: ChangeFriendRequested, User: e.From, Peer: e.To, By: e.From}, true
	case *domain.FriendAccepted:
		return Change{Kind: ChangeFriendAccepted, User: e.To, Peer: e.From, By: e.To}, true
	case *domain.FriendDeclined:
		return Change{Kind: ChangeFriendDeclined, User: e.To, Peer: e.From, By: e.To}, true
	case *domain.FriendRemoved:
		return Change{Kind: ChangeFriendRemoved, User: e.By, Peer: e.Peer, By: e.By}, true
	case *domain.UserBlocked:
		return Change{Kind: ChangeBlocked, User: e.By, Peer: e.Peer, By: e.By}, true
	case *domain.UserUnblocked:
		return Change{Kind: ChangeUnblocked, User: e.By, Peer: e.Peer, By: e.By}, true
	case *domain.UserProfileUpdated:
		return Change{Kind: ChangeProfile, User: e.User, By: e.User}, true
	}
	return Change{}, false
}

// notify hands each change to n.
func notify(ctx context.Context, n Notifier, tenant domain.TenantID, changes []Change) {
	for _, c := range changes {
		switch {
		case c.Kind == ChangeProfile:
			n.ProfileChanged(ctx, tenant, c.User)
		case c.Peer != 0:
			n.RelationChanged(ctx, tenant, c.User, c.Peer, c.Kind)
		case c.User != 0 && c.Kind != ChangeOwner:
			n.MembershipChanged(ctx, tenant, c.Group, c.User, c.Kind)
		default:
			n.GroupChanged(ctx, tenant, c.Group, c.Kind)
		}
	}
}
