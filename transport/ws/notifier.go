package ws

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/fanout"
)

// ControlPublisher delivers a control message to a topic's sessions on every node
// (fanout.Fanout implements it; a Hub does for a single node). It may wait briefly for room
// rather than drop the message, and fails when it could not hand it on.
type ControlPublisher interface {
	PublishControl(ctx context.Context, m *fanout.Message) error
}

var (
	_ ControlPublisher = (*fanout.Fanout)(nil)
	_ ControlPublisher = (*Hub)(nil)
)

// Notifier gives the group handlers' committed changes their realtime effects: it implements
// group.Notifier by publishing one fanout.KindControl message per change to the topic the change
// concerns, which every node with online members of the topic (every node, for a change that
// ends subscriptions) applies to its Hub (the doc's "Changes" section lists the info frames).
// A member who left or was removed, every member of a
// dissolved group, and a user blocked by the peer of a 1:1 topic lose their subscriptions to the
// topic on every node at once; the send and read policies refuse them from then on.
//
// It is best effort, like the Notifier contract: a message fanout cannot hand on is logged and
// lost, and the dropped user is then still refused by the policies but keeps receiving realtime
// messages on other nodes until it leaves the topic or reconnects. A user's profile change has
// no topic and is not pushed.
type Notifier struct {
	pub ControlPublisher
	log *slog.Logger
}

var _ group.Notifier = (*Notifier)(nil)

// NewNotifier returns a Notifier publishing through pub (this node's fanout). A nil logger
// discards.
func NewNotifier(pub ControlPublisher, logger *slog.Logger) (*Notifier, error) {
	if pub == nil {
		return nil, errors.New("ws: notifier: a ControlPublisher is required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{pub: pub, log: logger}, nil
}

// The info "what" of each change; a change missing here is not pushed.
var changeWhat = map[group.ChangeKind]string{
	group.ChangeGroupProfile:    "profile",
	group.ChangeGroupSettings:   "settings",
	group.ChangeAnnouncement:    "announcement",
	group.ChangeOwner:           "owner",
	group.ChangeDissolved:       "dissolved",
	group.ChangeInvited:         "invited",
	group.ChangeJoinRequested:   "join_requested",
	group.ChangeJoinRejected:    "join_rejected",
	group.ChangeJoined:          "joined",
	group.ChangeLeft:            "left",
	group.ChangeRemoved:         "removed",
	group.ChangeUnbanned:        "unbanned",
	group.ChangeRoleSet:         "role",
	group.ChangeMuted:           "mute",
	group.ChangeUnmuted:         "unmute",
	group.ChangeFriendRequested: "friend_requested",
	group.ChangeFriendAccepted:  "friend_accepted",
	group.ChangeFriendDeclined:  "friend_declined",
	group.ChangeFriendRemoved:   "friend_removed",
	group.ChangeBlocked:         "blocked",
	group.ChangeUnblocked:       "unblocked",
}

// GroupChanged implements group.Notifier: the group topic's sessions hear it; a dissolution ends
// every subscription to the topic.
func (n *Notifier) GroupChanged(ctx context.Context, tenant domain.TenantID, g domain.GroupID, change group.ChangeKind) {
	topic, err := g.Topic()
	if err != nil {
		return
	}
	drop := fanout.DropNone
	if change == group.ChangeDissolved {
		drop = fanout.DropAll
	}
	n.publish(ctx, tenant, topic, change, fanout.Message{Drop: drop})
}

// MembershipChanged implements group.Notifier: the group topic's sessions hear it, with src the
// member; when the member left or was removed, the member's sessions lose the subscription.
func (n *Notifier) MembershipChanged(ctx context.Context, tenant domain.TenantID, g domain.GroupID, user domain.UserID, change group.ChangeKind) {
	topic, err := g.Topic()
	if err != nil {
		return
	}
	drop := fanout.DropNone
	if change == group.ChangeLeft || change == group.ChangeRemoved {
		drop = fanout.DropUser
	}
	n.publish(ctx, tenant, topic, change, fanout.Message{Src: user, Drop: drop})
}

// RelationChanged implements group.Notifier: the sessions of the two users' 1:1 topic hear it,
// with from the user who acted (a) and src the peer (b); a block ends b's subscriptions to the
// topic, a's stay.
func (n *Notifier) RelationChanged(ctx context.Context, tenant domain.TenantID, a, b domain.UserID, change group.ChangeKind) {
	topic, err := domain.DirectTopic(a, b)
	if err != nil {
		return
	}
	drop := fanout.DropNone
	if change == group.ChangeBlocked {
		drop = fanout.DropUser
	}
	n.publish(ctx, tenant, topic, change, fanout.Message{From: a, Src: b, Drop: drop})
}

// ProfileChanged implements group.Notifier. A user's profile belongs to no topic; nothing is
// pushed, clients see the change when they next read the profile.
func (n *Notifier) ProfileChanged(context.Context, domain.TenantID, domain.UserID) {}

// Invalidating is the fanout.Deliverer in front of the Hub of a node whose policies cache
// folded states (the send policy's cache, which the read policy shares). Before Next applies a
// control message that ends subscriptions, it hands Invalidate the streams of the states the
// change concerns: the group's and the member's for a group topic, the relation's for a 1:1
// topic. The committing node's own invalidation travels to the other nodes on a channel of its
// own and may come later; without this, a sub that the Hub sees after the change could still be
// answered from a state cached before it, and join for good. Invalidate must not block on I/O.
type Invalidating struct {
	Next       fanout.Deliverer
	Invalidate func(tenant domain.TenantID, streamIDs []string)
}

var _ fanout.Deliverer = Invalidating{}

// Deliver implements fanout.Deliverer.
func (d Invalidating) Deliver(m *fanout.Message) {
	if m.Kind == fanout.KindControl && m.Drop != fanout.DropNone {
		if ids := droppedStreams(m); len(ids) > 0 {
			d.Invalidate(m.Tenant, ids)
		}
	}
	d.Next.Deliver(m)
}

// droppedStreams are the streams whose states decide the subscriptions control message m ends.
func droppedStreams(m *fanout.Message) []string {
	switch m.Topic.Kind() {
	case domain.TopicGroup:
		g := domain.GroupID(m.Topic.GroupID())
		ids := []string{domain.GroupStreamID(g)}
		if m.Src != 0 {
			ids = append(ids, domain.MembershipStreamID(g, m.Src))
		}
		return ids
	case domain.TopicDirect:
		if id, err := domain.RelationStreamID(m.Topic.Parties()); err == nil {
			return []string{id}
		}
	}
	return nil
}

// publish completes m as the control message of change in topic and hands it to the publisher.
func (n *Notifier) publish(ctx context.Context, tenant domain.TenantID, topic domain.Topic, change group.ChangeKind, m fanout.Message) {
	what, ok := changeWhat[change]
	if !ok {
		return
	}
	m.Kind, m.Tenant, m.Topic, m.What, m.TS = fanout.KindControl, tenant, topic, what, time.Now().UTC()
	if err := n.pub.PublishControl(ctx, &m); err != nil {
		n.log.WarnContext(ctx, "ws: topic change not sent to other nodes", "tenant_id", tenant.String(),
			"topic", topic.String(), "what", what, "err", err)
	}
}
