package ws_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/userchan"
)

// sendMsg sends text to topic as from through node n's send handler and returns the seq.
func sendMsg(t *testing.T, n *node, from domain.UserID, topic domain.Topic, text string) int64 {
	t.Helper()
	seq, err := trySend(t, n, from, topic, text)
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// sendCount numbers the sends of sendMsg and trySend: their client_msg_ids.
var sendCount atomic.Int64

// trySend is sendMsg for other goroutines than the test's: it returns the error.
func trySend(t *testing.T, n *node, from domain.UserID, topic domain.Topic, text string) (int64, error) {
	content, err := domain.TextContent(text, 0)
	if err != nil {
		return 0, err
	}
	id, err := domain.NewClientMsgID(fmt.Sprintf("c-%d", sendCount.Add(1)))
	if err != nil {
		return 0, err
	}
	res, err := n.send.Handle(testCtx(t), message.SendMessage{Tenant: acme, From: from, Topic: topic, ClientMsgID: id, Content: content})
	return res.Seq, err
}

// channelNodes starts two full nodes serving the channel over one read model.
func channelNodes(t *testing.T, cfg userchan.Config) (*cluster, *fullNode, *fullNode) {
	t.Helper()
	c := newCluster(t)
	c.readModel(t)
	a := c.fullNodeOpts(t, "node-a", fullOpts{channel: &cfg})
	b := c.fullNodeOpts(t, "node-b", fullOpts{channel: &cfg})
	return c, a, b
}

// checkSeqs checks that cl's logged items are numbered 1, 2, 3, ... with none twice.
func checkSeqs(t *testing.T, cl *client) {
	t.Helper()
	for i, it := range cl.items() {
		if it.Seq != strconv.Itoa(i+1) {
			t.Fatalf("%s: item %d has seq %s (items %v)", cl.name, i, it.Seq, cl.items())
		}
	}
}

// TestEveryChannelItemReachesTheUserOnAnotherNode drives every kind of item with the group
// handlers of one node while its user's channel session is on the other: group memberships (the
// owner's join of the group it creates, a join request heard by the owner, its rejection, an
// approved join, role, mute, unmute, an invitation, a removal with a ban, an unban, an accepted
// invitation, a leave, the dissolution), relations (request, decline, acceptance, removal, block,
// unblock), a new 1:1 conversation, a read mark made on another device, and the channel frames of
// the messages of conversations the session is not subscribed to (msg, recall, edit), which stop
// for a group the user was removed from and a 1:1 topic whose peer blocks the user. Each user's
// items are numbered 1, 2, 3, ... in the order they happened.
func TestEveryChannelItemReachesTheUserOnAnotherNode(t *testing.T) {
	t.Parallel()
	c, a, b := channelNodes(t, userchan.Config{})
	ctx := testCtx(t)
	const alice, bob, carol domain.UserID = 1, 2, 3
	aliceA := dial(t, a.node, "alice@a", dialOpts{})
	bobB := dial(t, b.node, "bob@b", dialOpts{})
	carolB := dial(t, b.node, "carol@b", dialOpts{})
	for cl, u := range map[*client]domain.UserID{aliceA: alice, bobB: bob, carolB: carol} {
		cl.login(c, u)
		if p := cl.subMe(); p["topic"] != "me" || p["last_seq"] != "0" || p["epoch"] != "" {
			t.Fatalf("%s: first sub me = %v", cl.name, p)
		}
	}
	p := func(u domain.UserID) domain.Principal { return who(acme, u) }
	must := func(_ group.Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	expect := func(cl *client, what, topic string, from, src domain.UserID) meFrame {
		t.Helper()
		return expectItem(t, cl, what, topic, from, src)
	}

	profile, _ := domain.NewGroupProfile("team", "", "")
	approval := domain.DefaultGroupSettings()
	approval.JoinApproval = true
	res, err := b.groups.CreateGroup.Handle(ctx, group.CreateGroup{Actor: p(alice), Profile: profile, Settings: &approval})
	if err != nil {
		t.Fatal(err)
	}
	g, grp := res.Group, res.Topic.String()
	expect(aliceA, "joined", grp, alice, alice)

	must(a.groups.RequestJoin.Handle(ctx, group.RequestJoin{Actor: p(bob), Group: g}))
	c.project(t) // the owner is found through the read model
	// The request was decided on node a; alice hears it (as owner) there, bob on node b.
	must(a.groups.RejectJoin.Handle(ctx, group.RejectJoin{Actor: p(alice), Group: g, User: bob}))
	expect(bobB, "join_rejected", grp, alice, bob)
	must(a.groups.RequestJoin.Handle(ctx, group.RequestJoin{Actor: p(bob), Group: g}))
	must(b.groups.ApproveJoin.Handle(ctx, group.ApproveJoin{Actor: p(alice), Group: g, User: bob}))
	expect(bobB, "joined", grp, alice, bob)
	for _, what := range []string{"join_requested", "join_rejected", "joined"} {
		expect(aliceA, what, grp, 0, bob)
	}

	// bob now hears the group's messages on his channel, though not subscribed to the group.
	seq := sendMsg(t, a.node, alice, res.Topic, "hello team")
	bobB.waitFor("the msg frame", func([]serverFrame) bool { return len(channelMsgs(bobB, grp)) == 1 })
	m := channelMsgs(bobB, grp)[0]
	if m.MsgSeq != strconv.FormatInt(seq, 10) || m.From != "1" || string(m.Content) != `"hello team"` || m.Seq != "" {
		t.Errorf("bob's msg frame %s", m.Raw)
	}
	if _, err := a.ops.Recall(ctx, message.MessageRef{Tenant: acme, Topic: res.Topic, Seq: seq, Actor: alice}); err != nil {
		t.Fatal(err)
	}
	bobB.waitFor("the recall frame", func([]serverFrame) bool {
		for _, f := range bobB.me() {
			if f.What == "recall" && f.MsgSeq == strconv.FormatInt(seq, 10) {
				return true
			}
		}
		return false
	})

	must(a.groups.SetRole.Handle(ctx, group.SetRole{Actor: p(alice), Group: g, User: bob, Role: domain.RoleAdmin}))
	if it := expect(bobB, "role", grp, alice, bob); it.Role != "admin" {
		t.Errorf("role item %s", it.Raw)
	}
	must(a.groups.SetRole.Handle(ctx, group.SetRole{Actor: p(alice), Group: g, User: bob, Role: domain.RoleMember}))
	must(a.groups.MuteMember.Handle(ctx, group.MuteMember{Actor: p(alice), Group: g, User: bob, Until: time.Now().Add(time.Hour)}))
	expect(bobB, "mute", grp, alice, bob)
	must(a.groups.UnmuteMember.Handle(ctx, group.UnmuteMember{Actor: p(alice), Group: g, User: bob}))
	expect(bobB, "unmute", grp, alice, bob)
	must(a.groups.InviteMember.Handle(ctx, group.InviteMember{Actor: p(alice), Group: g, User: carol}))
	expect(carolB, "invited", grp, alice, carol)

	must(a.groups.RemoveMember.Handle(ctx, group.RemoveMember{Actor: p(alice), Group: g, User: bob, Ban: true}))
	expect(bobB, "removed", grp, alice, bob)
	must(a.groups.UnbanMember.Handle(ctx, group.UnbanMember{Actor: p(alice), Group: g, User: bob}))
	expect(bobB, "unbanned", grp, alice, bob)

	must(a.groups.AcceptInvite.Handle(ctx, group.AcceptInvite{Actor: p(carol), Group: g}))
	expect(carolB, "joined", grp, 0, carol)
	sendMsg(t, a.node, alice, res.Topic, "after bob left")
	carolB.waitFor("carol's msg frame", func([]serverFrame) bool { return len(channelMsgs(carolB, grp)) == 1 })
	must(b.groups.LeaveGroup.Handle(ctx, group.LeaveGroup{Actor: p(carol), Group: g}))
	expect(carolB, "left", grp, carol, carol)

	// Relations: both users hear each change, wherever it was made.
	dm, _ := domain.DirectTopic(alice, bob)
	must(a.groups.RequestFriend.Handle(ctx, group.RequestFriend{Actor: p(alice), Peer: bob}))
	must(b.groups.DeclineFriend.Handle(ctx, group.DeclineFriend{Actor: p(bob), Peer: alice}))
	must(b.groups.RequestFriend.Handle(ctx, group.RequestFriend{Actor: p(bob), Peer: alice}))
	must(a.groups.AcceptFriend.Handle(ctx, group.AcceptFriend{Actor: p(alice), Peer: bob}))
	must(a.groups.RemoveFriend.Handle(ctx, group.RemoveFriend{Actor: p(alice), Peer: bob}))
	for _, cl := range []*client{aliceA, bobB} {
		expect(cl, "friend_requested", dm.String(), alice, bob)
		expect(cl, "friend_declined", dm.String(), bob, alice)
		expect(cl, "friend_accepted", dm.String(), alice, bob)
		expect(cl, "friend_removed", dm.String(), alice, bob)
	}

	// The first 1:1 message opens a conversation for both; bob's later read on another device
	// (here: a command on node a) reaches his channel on node b.
	first := sendMsg(t, b.node, alice, dm, "hi bob")
	for _, cl := range []*client{aliceA, bobB} {
		it := expect(cl, "conv", dm.String(), alice, 0)
		var msg struct{ Seq, From, Content string }
		if err := json.Unmarshal(it.Message, &msg); err != nil || msg.Seq != "1" || msg.Content != "hi bob" {
			t.Errorf("%s: conv item %s", cl.name, it.Raw)
		}
	}
	if _, err := a.ops.MarkRead(ctx, message.MarkRead{Tenant: acme, Topic: dm, User: bob, ReadSeq: first}); err != nil {
		t.Fatal(err)
	}
	if it := expect(bobB, "read", dm.String(), 0, 0); it.ReadSeq != "1" {
		t.Errorf("read item %s", it.Raw)
	}

	checkBlockHidesMessages(t, ctx, a, aliceA, bobB, dm)
	// bob was removed: the group's messages no longer reach him; alice dissolves it and every
	// member hears it (carol left before, so not her).
	sendMsg(t, a.node, alice, res.Topic, "without bob")
	c.project(t)
	must(b.groups.DissolveGroup.Handle(ctx, group.DissolveGroup{Actor: p(alice), Group: g}))
	expect(aliceA, "dissolved", grp, alice, 0)
	time.Sleep(100 * time.Millisecond)
	for _, m := range channelMsgs(bobB, grp) {
		if string(m.Content) == `"without bob"` || string(m.Content) == `"after bob left"` {
			t.Errorf("bob's channel got a message of a group he was removed from: %s", m.Raw)
		}
	}
	for _, cl := range []*client{aliceA, bobB, carolB} {
		checkSeqs(t, cl)
	}
}

// expectItem waits for cl's item what of topic and checks it is from from (unless 0) with the
// source src (none when 0).
func expectItem(t *testing.T, cl *client, what, topic string, from, src domain.UserID) meFrame {
	t.Helper()
	srcs := ""
	if src != 0 {
		srcs = src.String()
	}
	it := cl.waitItem(what, topic, srcs)
	if from != 0 && it.From != from.String() {
		t.Errorf("%s: %s item %s, want from %d src %d", cl.name, what, it.Raw, from, src)
	}
	return it
}

// checkBlockHidesMessages has user 1 (aliceA) block user 2 (bobB) on node a and unblock him: both
// hear the block, and alice's 1:1 message of dm no longer reaches bob's channel until the unblock.
func checkBlockHidesMessages(t *testing.T, ctx context.Context, a *fullNode, aliceA, bobB *client, dm domain.Topic) {
	t.Helper()
	const alice, bob domain.UserID = 1, 2
	if _, err := a.groups.BlockUser.Handle(ctx, group.BlockUser{Actor: who(acme, alice), Peer: bob}); err != nil {
		t.Fatal(err)
	}
	expectItem(t, bobB, "blocked", dm.String(), alice, bob)
	expectItem(t, aliceA, "blocked", dm.String(), alice, bob)
	before := len(channelMsgs(bobB, dm.String()))
	sendMsg(t, a.node, alice, dm, "while blocked")
	if _, err := a.groups.UnblockUser.Handle(ctx, group.UnblockUser{Actor: who(acme, alice), Peer: bob}); err != nil {
		t.Fatal(err)
	}
	expectItem(t, bobB, "unblocked", dm.String(), alice, bob)
	sendMsg(t, a.node, alice, dm, "unblocked")
	bobB.waitFor("the message after the unblock", func([]serverFrame) bool {
		return slices.ContainsFunc(channelMsgs(bobB, dm.String()), func(m meFrame) bool { return string(m.Content) == `"unblocked"` })
	})
	for _, m := range channelMsgs(bobB, dm.String())[before:] {
		if string(m.Content) == `"while blocked"` {
			t.Errorf("bob's channel got the blocker's message %s", m.Raw)
		}
	}
}

// channelMsgs returns the msg frames of topic cl's channel received.
func channelMsgs(cl *client, topic string) []meFrame {
	var out []meFrame
	for _, m := range cl.me() {
		if m.What == "msg" && m.Topic == topic {
			out = append(out, m)
		}
	}
	return out
}

// TestChannelCarriesEveryCounterOfAUserInThreeThousandConversations puts a user in 3,000 groups,
// subscribes one session to the channel on node b (and to one of the groups), and sends one
// message to each group from node a: the session gets the data frame of the group it subscribed
// to and one msg frame for each of the 2,999 others, none twice.
func TestChannelCarriesEveryCounterOfAUserInThreeThousandConversations(t *testing.T) {
	t.Parallel()
	c, a, b := channelNodes(t, userchan.Config{})
	const owner, sender domain.UserID = 1, 2
	const groups = 3000
	ctx := testCtx(t)
	profile, _ := domain.NewGroupProfile("many", "", "")
	topics := make([]domain.Topic, groups)
	var wg sync.WaitGroup
	errs := make(chan error, groups)
	next := make(chan int, groups)
	for i := range groups {
		next <- i
	}
	close(next)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res, err := a.groups.CreateGroup.Handle(ctx, group.CreateGroup{Actor: who(acme, owner), Group: domain.GroupID(5000 + i), Profile: profile})
				if err != nil {
					errs <- err
					return
				}
				topics[i] = res.Topic
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c.project(t)

	cl := dial(t, b.node, "owner@b", dialOpts{})
	cl.login(c, owner)
	cl.subMe()
	cl.sub(topics[0].String())

	next2 := make(chan domain.Topic, groups)
	for _, tp := range topics {
		next2 <- tp
	}
	close(next2)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tp := range next2 {
				if _, err := trySend(t, a.node, sender, tp, "counter"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	counted := func() (msgs map[string]int, data int) {
		msgs = map[string]int{}
		for _, f := range cl.snapshot() {
			switch {
			case f.Me != nil && f.Me.What == "msg":
				msgs[f.Me.Topic]++
			case f.Data != nil:
				data++
			}
		}
		return msgs, data
	}
	cl.waitWithin(30*time.Second, "every counter", func([]serverFrame) bool {
		msgs, data := counted()
		return len(msgs) == groups-1 && data == 1
	})
	time.Sleep(200 * time.Millisecond) // room for a duplicate
	msgs, data := counted()
	if data != 1 || msgs[topics[0].String()] != 0 {
		t.Errorf("the subscribed group: %d data frames, %d msg frames; want its data frame alone", data, msgs[topics[0].String()])
	}
	for _, tp := range topics[1:] {
		if msgs[tp.String()] != 1 {
			t.Fatalf("%s: %d msg frames, want 1", tp, msgs[tp.String()])
		}
	}
}

// TestChannelStartsFromTheReadModelAndTheLogsLastItems subscribes to the channel while the read
// model trails: it still lists a group the user has just left and does not list one the user
// has just joined. The log's last items correct it: the joined group's messages reach the
// channel, the left group's do not.
func TestChannelStartsFromTheReadModelAndTheLogsLastItems(t *testing.T) {
	t.Parallel()
	c, a, b := channelNodes(t, userchan.Config{})
	const owner, user domain.UserID = 1, 2
	ctx := testCtx(t)
	storetest.RegisterUsers(t, c.store, acme, owner, user)
	left := newGroup(t, a.groups, acme, 0, owner, user)
	c.project(t) // the read model: user is a member of left
	if _, err := a.groups.LeaveGroup.Handle(ctx, group.LeaveGroup{Actor: who(acme, user), Group: domain.GroupID(left.GroupID())}); err != nil {
		t.Fatal(err)
	}
	joined := newGroup(t, a.groups, acme, 0, owner, user) // not projected
	cl := dial(t, b.node, "user@b", dialOpts{})
	cl.login(c, user)
	cl.subMe()
	sendMsg(t, a.node, owner, left, "to the group left")
	sendMsg(t, a.node, owner, joined, "to the group joined")
	cl.waitFor("the joined group's message", func([]serverFrame) bool { return len(channelMsgs(cl, joined.String())) == 1 })
	time.Sleep(150 * time.Millisecond)
	if got := channelMsgs(cl, left.String()); len(got) != 0 {
		t.Errorf("the channel got %d frames of the group the user left", len(got))
	}
}
