package ws_test

import (
	"context"
	"sync"
	"testing"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/ws"
)

// recordingPublisher records the control messages a Notifier publishes.
type recordingPublisher struct {
	mu   sync.Mutex
	msgs []*fanout.Message
}

func (r *recordingPublisher) PublishControl(_ context.Context, m *fanout.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
	return nil
}

// TestNotifierMapsEveryChange checks the control message of each kind of change: its topic,
// what, src, from and which subscriptions it ends.
func TestNotifierMapsEveryChange(t *testing.T) {
	t.Parallel()
	grp, _ := domain.GroupTopic(7)
	p2p, _ := domain.DirectTopic(5, 6)
	type want struct {
		topic     domain.Topic
		what      string
		src, from domain.UserID
		drop      fanout.Drop
	}
	cases := []struct {
		name   string
		notify func(context.Context, *ws.Notifier)
		want   *want // nil: nothing published
	}{
		{"created", groupChange(group.ChangeGroupCreated), nil},
		{"profile", groupChange(group.ChangeGroupProfile), &want{grp, "profile", 0, 0, fanout.DropNone}},
		{"settings", groupChange(group.ChangeGroupSettings), &want{grp, "settings", 0, 0, fanout.DropNone}},
		{"announcement", groupChange(group.ChangeAnnouncement), &want{grp, "announcement", 0, 0, fanout.DropNone}},
		{"owner", groupChange(group.ChangeOwner), &want{grp, "owner", 0, 0, fanout.DropNone}},
		{"dissolved", groupChange(group.ChangeDissolved), &want{grp, "dissolved", 0, 0, fanout.DropAll}},
		{"invited", memberChange(group.ChangeInvited), &want{grp, "invited", 9, 0, fanout.DropNone}},
		{"join requested", memberChange(group.ChangeJoinRequested), &want{grp, "join_requested", 9, 0, fanout.DropNone}},
		{"join rejected", memberChange(group.ChangeJoinRejected), &want{grp, "join_rejected", 9, 0, fanout.DropNone}},
		{"joined", memberChange(group.ChangeJoined), &want{grp, "joined", 9, 0, fanout.DropNone}},
		{"left", memberChange(group.ChangeLeft), &want{grp, "left", 9, 0, fanout.DropUser}},
		{"removed", memberChange(group.ChangeRemoved), &want{grp, "removed", 9, 0, fanout.DropUser}},
		{"unbanned", memberChange(group.ChangeUnbanned), &want{grp, "unbanned", 9, 0, fanout.DropNone}},
		{"role", memberChange(group.ChangeRoleSet), &want{grp, "role", 9, 0, fanout.DropNone}},
		{"muted", memberChange(group.ChangeMuted), &want{grp, "mute", 9, 0, fanout.DropNone}},
		{"unmuted", memberChange(group.ChangeUnmuted), &want{grp, "unmute", 9, 0, fanout.DropNone}},
		{"friend requested", relationChange(group.ChangeFriendRequested), &want{p2p, "friend_requested", 6, 5, fanout.DropNone}},
		{"friend accepted", relationChange(group.ChangeFriendAccepted), &want{p2p, "friend_accepted", 6, 5, fanout.DropNone}},
		{"friend declined", relationChange(group.ChangeFriendDeclined), &want{p2p, "friend_declined", 6, 5, fanout.DropNone}},
		{"friend removed", relationChange(group.ChangeFriendRemoved), &want{p2p, "friend_removed", 6, 5, fanout.DropNone}},
		{"blocked", relationChange(group.ChangeBlocked), &want{p2p, "blocked", 6, 5, fanout.DropUser}},
		{"unblocked", relationChange(group.ChangeUnblocked), &want{p2p, "unblocked", 6, 5, fanout.DropNone}},
		{"user profile", func(ctx context.Context, n *ws.Notifier) { n.ProfileChanged(ctx, acme, 5) }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec := &recordingPublisher{}
			n, err := ws.NewNotifier(rec, nil)
			if err != nil {
				t.Fatal(err)
			}
			c.notify(testCtx(t), n)
			if c.want == nil {
				if len(rec.msgs) != 0 {
					t.Fatalf("published %+v, want nothing", rec.msgs[0])
				}
				return
			}
			if len(rec.msgs) != 1 {
				t.Fatalf("published %d messages, want 1", len(rec.msgs))
			}
			m, w := rec.msgs[0], c.want
			if m.Kind != fanout.KindControl || m.Tenant != acme || m.Topic != w.topic || m.What != w.what ||
				m.Src != w.src || m.From != w.from || m.Drop != w.drop || m.TS.IsZero() {
				t.Errorf("published %+v, want %+v", m, *w)
			}
		})
	}
	if _, err := ws.NewNotifier(nil, nil); err == nil {
		t.Error("NewNotifier without a publisher succeeded")
	}
}

func groupChange(k group.ChangeKind) func(context.Context, *ws.Notifier) {
	return func(ctx context.Context, n *ws.Notifier) { n.GroupChanged(ctx, acme, 7, k) }
}

func memberChange(k group.ChangeKind) func(context.Context, *ws.Notifier) {
	return func(ctx context.Context, n *ws.Notifier) { n.MembershipChanged(ctx, acme, 7, 9, k) }
}

func relationChange(k group.ChangeKind) func(context.Context, *ws.Notifier) {
	return func(ctx context.Context, n *ws.Notifier) { n.RelationChanged(ctx, acme, 5, 6, k) }
}
