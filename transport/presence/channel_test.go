package presence_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/presence"
)

// nodesOf answers NodesForTopics for one ref, sorted.
func nodesOf(t *testing.T, s *presence.Store, ref presence.TopicRef) []string {
	t.Helper()
	lists, err := s.NodesForTopics(testCtx(t), []presence.TopicRef{ref})
	if err != nil {
		t.Fatal(err)
	}
	out := slices.Clone(lists[0])
	slices.Sort(out)
	return out
}

// TestChannelSessionsRouteTheirUsersConversations checks what a message's committing node reads:
// a group topic's nodes with Channel include the nodes whose channel sessions watch it (and
// only with Channel), a 1:1 topic's include the nodes with a channel session of either user, and
// registrations end with the last local session that holds them, at Unwatch, ChannelOff and
// Logout.
func TestChannelSessionsRouteTheirUsersConversations(t *testing.T) {
	t.Parallel()
	e := newEnv(t, presence.Config{})
	ctx := testCtx(t)
	g1, g2, dm := mustTopic(t, "grp1"), mustTopic(t, "grp2"), mustTopic(t, "p2p7_8")
	a7, a7b := login(t, e.a, 7, "a7"), login(t, e.a, 7, "a7b")
	b8 := login(t, e.b, 8, "b8")
	if err := a7.ChannelOn(ctx, []domain.Topic{g1, g2, dm}); err != nil {
		t.Fatal(err)
	}
	if err := a7b.ChannelOn(ctx, []domain.Topic{g1}); err != nil {
		t.Fatal(err)
	}
	if err := b8.ChannelOn(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := b8.Join(ctx, g2); err != nil { // an online subscriber, not a watcher
		t.Fatal(err)
	}
	ref := func(tp domain.Topic, ch bool) presence.TopicRef {
		return presence.TopicRef{Tenant: acme, Topic: tp, Channel: ch}
	}
	for _, tc := range []struct {
		name string
		ref  presence.TopicRef
		want []string
	}{
		{"group, channel", ref(g1, true), []string{"node-a"}},
		{"group, no channel", ref(g1, false), nil},
		{"group with a subscriber elsewhere, channel", ref(g2, true), []string{"node-a", "node-b"}},
		{"group with a subscriber elsewhere, no channel", ref(g2, false), []string{"node-b"}},
		{"direct, channel: both users' nodes", ref(dm, true), []string{"node-a", "node-b"}},
		{"direct, no channel", ref(dm, false), nil},
		{"another tenant", presence.TopicRef{Tenant: domain.MustTenantID("other"), Topic: g1, Channel: true}, nil},
	} {
		if got := nodesOf(t, e.b, tc.ref); !slices.Equal(got, tc.want) {
			t.Errorf("%s: nodes %v, want %v", tc.name, got, tc.want)
		}
	}
	if a7.Watching() != 2 {
		t.Errorf("a7 watches %d topics, want 2 (1:1 topics are routed by their users)", a7.Watching())
	}

	// The other local session still watches grp1: node-a stays listed.
	if err := a7.Unwatch(ctx, []domain.Topic{g1, g2}); err != nil {
		t.Fatal(err)
	}
	if got := nodesOf(t, e.b, ref(g1, true)); !slices.Equal(got, []string{"node-a"}) {
		t.Errorf("grp1 after one of two watchers left: %v", got)
	}
	if got := nodesOf(t, e.b, ref(g2, true)); !slices.Equal(got, []string{"node-b"}) {
		t.Errorf("grp2 after its only watcher left: %v", got)
	}
	if err := a7b.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	if got := nodesOf(t, e.b, ref(g1, true)); len(got) != 0 {
		t.Errorf("grp1 after the last watcher logged out: %v", got)
	}
	// user 7 is still on node-a's channel through a7.
	if got := nodesOf(t, e.b, ref(dm, true)); !slices.Equal(got, []string{"node-a", "node-b"}) {
		t.Errorf("p2p7_8 while both users are on: %v", got)
	}
	if err := a7.ChannelOff(ctx); err != nil {
		t.Fatal(err)
	}
	if got := nodesOf(t, e.b, ref(dm, true)); !slices.Equal(got, []string{"node-b"}) {
		t.Errorf("p2p7_8 after user 7 went off the channel: %v", got)
	}
	if err := a7.Watch(ctx, []domain.Topic{g1}); err != nil { // off the channel: ignored
		t.Fatal(err)
	}
	if got := nodesOf(t, e.b, ref(g1, true)); len(got) != 0 {
		t.Errorf("a session off its channel watched grp1: %v", got)
	}
}

// TestChannelRegistrationsAreRefreshedAndLapse checks that the heartbeat keeps a channel
// registration alive past its TTL, and that a node that stops refreshing (a crash) drops out.
func TestChannelRegistrationsAreRefreshedAndLapse(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	cfg := presence.Config{KeyPrefix: prefix, TTL: time.Second, TouchInterval: 200 * time.Millisecond}
	a := newStore(t, rdb, cfg, "node-a")
	b := newStore(t, rdb, cfg, "node-b")
	ctx := testCtx(t)
	g := mustTopic(t, "grp9")
	sa := login(t, a, 1, "s1")
	if err := sa.ChannelOn(ctx, []domain.Topic{g}); err != nil {
		t.Fatal(err)
	}
	sb := login(t, b, 2, "s2")
	if err := sb.ChannelOn(ctx, []domain.Topic{g}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = a.Run(runCtx) }() // node-b never refreshes: it has crashed
	time.Sleep(2500 * time.Millisecond)
	got, err := a.NodesForTopics(ctx, []presence.TopicRef{{Tenant: acme, Topic: g, Channel: true}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[0], []string{"node-a"}) {
		t.Errorf("after 2.5 TTLs: %v, want node-a alone (refreshed) and node-b lapsed", got[0])
	}
}
