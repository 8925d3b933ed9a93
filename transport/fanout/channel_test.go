package fanout_test

import (
	"slices"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/presence"
)

// channelOn puts user on its channel on n, watching topics.
func (n *node) channelOn(t *testing.T, user domain.UserID, topics ...domain.Topic) {
	t.Helper()
	ctx := testCtx(t)
	s, err := n.pres.Login(ctx, presence.LoginInfo{Tenant: acme, User: user, SessionID: n.id + "-chan-" + user.String()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ChannelOn(ctx, topics); err != nil {
		t.Fatal(err)
	}
}

// kinds returns the kinds of the messages n received for topic.
func (n *node) kinds(topic string) []fanout.Kind {
	var out []fanout.Kind
	for _, m := range n.got.snapshot() {
		if m.Topic.String() == topic {
			out = append(out, m.Kind)
		}
	}
	return out
}

// TestMessagesReachNodesWhoseChannelsWatchTheConversation checks the routing of committed
// messages to per-user channel sessions: a node with no subscriber of a group topic but a channel
// session watching it gets the topic's data and change messages, never its notes or presence;
// a 1:1 topic's messages reach the nodes of its users' channel sessions; a node with neither
// gets nothing.
func TestMessagesReachNodesWhoseChannelsWatchTheConversation(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	grp, _ := domain.GroupTopic(5)
	dm, _ := domain.DirectTopic(1, 2)
	a := newNode(t, rdb, prefix, "node-a")
	b := newNode(t, rdb, prefix, "node-b")
	c := newNode(t, rdb, prefix, "node-c")
	b.channelOn(t, 3, grp) // user 3 watches grp5 on node-b
	c.channelOn(t, 2)      // user 2 is on its channel on node-c
	now := time.Now().UTC()
	a.fan.Publish(&fanout.Message{Kind: fanout.KindInfo, Tenant: acme, Topic: grp, From: 1, What: "kp", TS: now})
	a.fan.Publish(&fanout.Message{Kind: fanout.KindPres, Tenant: acme, Topic: grp, From: 1, What: "on", TS: now})
	a.fan.Publish(&fanout.Message{Kind: fanout.KindData, Tenant: acme, Topic: grp, From: 1, Seq: 1, TS: now, Content: []byte(`"x"`)})
	a.fan.Publish(&fanout.Message{Kind: fanout.KindChange, Tenant: acme, Topic: grp, From: 1, Seq: 1, What: "recall", TS: now})
	a.fan.Publish(&fanout.Message{Kind: fanout.KindData, Tenant: acme, Topic: dm, From: 1, Seq: 1, TS: now, Content: []byte(`"y"`)})
	waitFor(t, "node-b's group messages", func() bool { return len(b.kinds("grp5")) >= 2 })
	waitFor(t, "node-c's direct message", func() bool { return len(c.kinds("p2p1_2")) >= 1 })
	time.Sleep(100 * time.Millisecond) // room for a wrong delivery to show up
	if got, want := b.kinds("grp5"), []fanout.Kind{fanout.KindData, fanout.KindChange}; !slices.Equal(got, want) {
		t.Errorf("node-b got %v for grp5, want %v (no note, no presence)", got, want)
	}
	if got := b.kinds("p2p1_2"); len(got) != 0 {
		t.Errorf("node-b got %v for p2p1_2: none of its users is on node-b", got)
	}
	if got := c.kinds("grp5"); len(got) != 0 {
		t.Errorf("node-c got %v for grp5, which none of its channels watches", got)
	}
}

// TestPublishNodesDeliversToTheNodesNamed checks that a KindUser item goes to exactly the nodes
// named, this one included when named, each once.
func TestPublishNodesDeliversToTheNodesNamed(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	a := newNode(t, rdb, prefix, "node-a")
	b := newNode(t, rdb, prefix, "node-b")
	c := newNode(t, rdb, prefix, "node-c")
	m := &fanout.Message{Kind: fanout.KindUser, Tenant: acme, To: 7, What: "friend_requested", TS: time.Now().UTC(),
		Content: []byte(`{"seq":"1","what":"friend_requested"}`)}
	if err := a.fan.PublishNodes(testCtx(t), fanout.Routed{Message: m, Nodes: []string{"node-a", "node-b", "node-b"}}); err != nil {
		t.Fatal(err)
	}
	users := func(n *node) []*fanout.Message {
		var out []*fanout.Message
		for _, m := range n.got.snapshot() {
			if m.Kind == fanout.KindUser {
				out = append(out, m)
			}
		}
		return out
	}
	waitFor(t, "node-b's item", func() bool { return len(users(b)) == 1 })
	time.Sleep(100 * time.Millisecond)
	if n := len(users(a)); n != 1 {
		t.Errorf("node-a delivered the item %d times, want once", n)
	}
	got := users(b)
	if len(got) != 1 || got[0].To != 7 || string(got[0].Content) != `{"seq":"1","what":"friend_requested"}` {
		t.Errorf("node-b got %+v", got)
	}
	if n := len(users(c)); n != 0 {
		t.Errorf("node-c, not named, got %d items", n)
	}
}
