package ws_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/ws"
)

// TestRemovedMemberIsDroppedOnEveryNode removes member X, who has a session on each node, with
// the real group handlers of node A. Both of X's sessions get the removal as the last frame of
// the group and nothing after it: not the messages a member on A sends right after the removal
// returns, nor those a member on B sends once X heard of it. The other members get every message
// and the same info frame. X's sub, get and pub are refused from then on, on both nodes. A user
// of another tenant with X's id, in a group with X's group's id, keeps its subscription.
func TestRemovedMemberIsDroppedOnEveryNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.fullNode(t, "node-a")
	b := c.fullNode(t, "node-b")
	const owner, x, y, z domain.UserID = 1, 2, 3, 4
	topic := newGroup(t, a.groups, acme, 0, owner, x, y, z)
	grp := topic.String()
	globex := domain.MustTenantID("globex")
	newGroup(t, a.groups, globex, domain.GroupID(topic.GroupID()), 9, x)

	ownerA, yA, xA := dial(t, a.node, "owner@a", dialOpts{}), dial(t, a.node, "y@a", dialOpts{}), dial(t, a.node, "x@a", dialOpts{})
	xB, zB, otherX := dial(t, b.node, "x@b", dialOpts{}), dial(t, b.node, "z@b", dialOpts{}), dial(t, b.node, "globex-x@b", dialOpts{})
	for cl, u := range map[*client]domain.UserID{ownerA: owner, yA: y, xA: x, xB: x, zB: z} {
		cl.login(c, u)
		cl.sub(grp)
	}
	otherX.loginAs(c, globex, x)
	otherX.sub(grp)
	if r := yA.pub("before", grp, "before"); r.Code != 202 {
		t.Fatalf("pub before the removal = %+v", r)
	}
	for _, cl := range []*client{ownerA, yA, xA, xB, zB} {
		cl.waitFor("the first message", func([]serverFrame) bool { return len(cl.contents(grp)) == 1 })
	}

	if _, err := a.groups.RemoveMember.Handle(testCtx(t), group.RemoveMember{Actor: who(acme, owner), Group: domain.GroupID(topic.GroupID()), User: x}); err != nil {
		t.Fatal(err)
	}
	// Right after the command returned, without waiting for anyone to hear of it: this node's
	// send path already refuses X, and y's messages follow the removal.
	if r := xA.pub("instant", grp, "instant"); r.Code != 403 || r.Reason != "not_member" {
		t.Errorf("x's pub on the removing node right after the removal = %d %s, want 403 not_member", r.Code, r.Reason)
	}
	for i := range 3 {
		if r := yA.pub(fmt.Sprintf("y%d", i), grp, fmt.Sprintf("y%d", i)); r.Code != 202 {
			t.Fatalf("pub after the removal = %+v", r)
		}
	}
	for _, cl := range []*client{xA, xB, ownerA, yA, zB} {
		if got := cl.waitInfo(grp, "removed"); got.Src != x.String() {
			t.Errorf("%s: removal info = %+v, want src %s", cl.name, got, x)
		}
	}
	// y's messages reach node b over Redis, z's are committed on node b: a node delivers each
	// message as it commits or arrives, so z sends once y's have arrived to keep one order to check.
	zB.waitFor("y's messages on node b", func([]serverFrame) bool { return len(zB.contents(grp)) >= 4 })
	for i := range 3 {
		if r := zB.pub(fmt.Sprintf("z%d", i), grp, fmt.Sprintf("z%d", i)); r.Code != 202 {
			t.Fatalf("pub after the removal = %+v", r)
		}
	}
	want := []string{"before", "y0", "y1", "y2", "z0", "z1", "z2"}
	for _, cl := range []*client{ownerA, yA, zB} {
		cl.waitFor("every message", func([]serverFrame) bool { return len(cl.contents(grp)) >= len(want) })
	}
	time.Sleep(150 * time.Millisecond) // room for a leaked message to arrive
	for _, cl := range []*client{ownerA, yA, zB} {
		if got := cl.contents(grp); !slices.Equal(got, want) {
			t.Errorf("%s received %q, want %q", cl.name, got, want)
		}
	}
	for _, cl := range []*client{xA, xB} {
		if got := cl.contents(grp); !slices.Equal(got, want[:1]) {
			t.Errorf("%s, removed, received %q; want only the message from before the removal", cl.name, got)
		}
		if after := cl.afterInfo(grp, "removed"); len(after) != 0 {
			t.Errorf("%s received %d frames of %s after its removal", cl.name, len(after), grp)
		}
	}
	checkRemovedRefused(t, grp, xA, xB)
	checkOtherTenantKept(t, c, a, b, otherX, globex, topic)
	if n := b.gw.Hub().Subscribers(acme, topic); n != 1 {
		t.Errorf("node B has %d sessions in %s, want z's only", n, grp)
	}
	if n := a.gw.Hub().Subscribers(acme, topic); n != 2 {
		t.Errorf("node A has %d sessions in %s, want the owner's and y's", n, grp)
	}
}

// checkRemovedRefused checks that the removed user's sessions may neither subscribe again, read
// history nor post, and that a leave is still answered.
func checkRemovedRefused(t *testing.T, grp string, sessions ...*client) {
	t.Helper()
	for _, cl := range sessions {
		if r := cl.call("resub", map[string]any{"sub": map[string]any{"id": "resub", "topic": grp}}); r.Code != 403 || r.Reason != "not_member" {
			t.Errorf("%s: sub after the removal = %d %s, want 403 not_member", cl.name, r.Code, r.Reason)
		}
		if r := cl.call("get", map[string]any{"get": map[string]any{"id": "get", "topic": grp}}); r.Code != 403 {
			t.Errorf("%s: get after the removal = %d %s, want 403", cl.name, r.Code, r.Reason)
		}
		if r := cl.pub("late", grp, "late"); r.Code != 403 || r.Reason != "not_member" {
			t.Errorf("%s: pub after the removal = %d %s, want 403 not_member", cl.name, r.Code, r.Reason)
		}
		if r := cl.call("leave", map[string]any{"leave": map[string]any{"id": "leave", "topic": grp}}); r.Code != 200 {
			t.Errorf("%s: leave after the removal = %+v", cl.name, r)
		}
	}
}

// checkOtherTenantKept checks that a session of another tenant, of the removed user's id, in the
// same topic name, was neither told nor dropped.
func checkOtherTenantKept(t *testing.T, c *cluster, a, b *fullNode, cl *client, tenant domain.TenantID, topic domain.Topic) {
	t.Helper()
	if got := cl.infos(topic.String()); len(got) != 0 {
		t.Errorf("%s heard %+v about another tenant's group", cl.name, got)
	}
	if n := b.gw.Hub().Subscribers(tenant, topic); n != 1 {
		t.Fatalf("%s's subscription is gone (%d sessions in its topic)", cl.name, n)
	}
	owner := dial(t, a.node, "globex-owner@a", dialOpts{})
	owner.loginAs(c, tenant, 9)
	if r := owner.pub("g", topic.String(), "still here"); r.Code != 202 {
		t.Fatalf("%s: pub = %+v", owner.name, r)
	}
	cl.waitFor("its tenant's message", func([]serverFrame) bool { return slices.Contains(cl.contents(topic.String()), "still here") })
}

// TestBlockedPeerIsDroppedFromTheDirectTopic has user 5 (on node A) block user 6 (on node B)
// with the real handlers: both hear of it, 6's subscription to their 1:1 topic ends, 5's stays;
// 5's later messages reach 5's own session and not 6's, and 6 may no longer post to 5.
func TestBlockedPeerIsDroppedFromTheDirectTopic(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.fullNode(t, "node-a")
	b := c.fullNode(t, "node-b")
	const blocker, blocked domain.UserID = 5, 6
	topic, err := domain.DirectTopic(blocker, blocked)
	if err != nil {
		t.Fatal(err)
	}
	p2p := topic.String()
	u5, u6 := dial(t, a.node, "blocker@a", dialOpts{}), dial(t, b.node, "blocked@b", dialOpts{})
	u5.login(c, blocker)
	u6.login(c, blocked)
	u5.sub(p2p)
	u6.sub(p2p)
	if r := u6.pub("hello", p2p, "hello"); r.Code != 202 {
		t.Fatalf("pub before the block = %+v", r)
	}
	u5.waitFor("the greeting", func([]serverFrame) bool { return len(u5.contents(p2p)) == 1 })

	if _, err := a.groups.BlockUser.Handle(testCtx(t), group.BlockUser{Actor: who(acme, blocker), Peer: blocked}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if r := u5.pub(fmt.Sprintf("m%d", i), p2p, fmt.Sprintf("m%d", i)); r.Code != 202 {
			t.Fatalf("blocker's pub = %+v", r)
		}
	}
	for _, cl := range []*client{u5, u6} {
		if got := cl.waitInfo(p2p, "blocked"); got.Src != blocked.String() || got.From != blocker.String() {
			t.Errorf("%s: block info = %+v, want src %s from %s", cl.name, got, blocked, blocker)
		}
	}
	// Before 6 sends anything that would make its reader tidy up: its presence in the topic is
	// gone, so node B is no longer a target of the topic.
	deadline := time.Now().Add(5 * time.Second)
	for {
		nodes, err := a.pres.NodesForTopic(testCtx(t), acme, topic)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(nodes, []string{"node-a"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes of %s after the block = %v, want node-a only", p2p, nodes)
		}
		time.Sleep(5 * time.Millisecond)
	}
	want := []string{"hello", "m0", "m1", "m2"}
	u5.waitFor("its own messages", func([]serverFrame) bool { return len(u5.contents(p2p)) >= len(want) })
	time.Sleep(150 * time.Millisecond)
	if got := u5.contents(p2p); !slices.Equal(got, want) {
		t.Errorf("blocker received %q, want %q", got, want)
	}
	if got := u6.contents(p2p); !slices.Equal(got, want[:1]) {
		t.Errorf("blocked user received %q, want only its own message from before the block", got)
	}
	if after := u6.afterInfo(p2p, "blocked"); len(after) != 0 {
		t.Errorf("blocked user received %d frames after the block", len(after))
	}
	if r := u6.pub("late", p2p, "late"); r.Code != 403 || r.Reason != "blocked" {
		t.Errorf("blocked user's pub = %d %s, want 403 blocked", r.Code, r.Reason)
	}
	if n := b.gw.Hub().Subscribers(acme, topic); n != 0 {
		t.Errorf("node B still has %d sessions in %s", n, p2p)
	}
	if n := a.gw.Hub().Subscribers(acme, topic); n != 1 {
		t.Errorf("node A has %d sessions in %s, want the blocker's", n, p2p)
	}
}

// TestRoleChangeNotifiesAndDissolutionDropsEveryone: a role change and a settings change reach
// every member on both nodes as info frames without ending anyone's subscription; dissolving
// the group then ends every subscription on both nodes.
func TestRoleChangeNotifiesAndDissolutionDropsEveryone(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.fullNode(t, "node-a")
	b := c.fullNode(t, "node-b")
	const owner, m1, m2 domain.UserID = 1, 2, 3
	topic := newGroup(t, a.groups, acme, 0, owner, m1, m2)
	gid := domain.GroupID(topic.GroupID())
	grp := topic.String()
	clients := []*client{dial(t, a.node, "owner@a", dialOpts{}), dial(t, b.node, "m1@b", dialOpts{}), dial(t, b.node, "m2@b", dialOpts{})}
	for i, u := range []domain.UserID{owner, m1, m2} {
		clients[i].login(c, u)
		clients[i].sub(grp)
	}
	ctx := testCtx(t)
	if _, err := b.groups.SetRole.Handle(ctx, group.SetRole{Actor: who(acme, owner), Group: gid, User: m1, Role: domain.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	settings := domain.DefaultGroupSettings()
	settings.MuteAll = true
	if _, err := a.groups.UpdateGroupSettings.Handle(ctx, group.UpdateGroupSettings{Actor: who(acme, owner), Group: gid, Settings: settings}); err != nil {
		t.Fatal(err)
	}
	for _, cl := range clients {
		if got := cl.waitInfo(grp, "role"); got.Src != m1.String() {
			t.Errorf("%s: role info = %+v", cl.name, got)
		}
		cl.waitInfo(grp, "settings")
	}
	if n := a.gw.Hub().Subscribers(acme, topic) + b.gw.Hub().Subscribers(acme, topic); n != 3 {
		t.Fatalf("%d sessions in %s after the role change, want 3", n, grp)
	}
	if _, err := a.groups.DissolveGroup.Handle(ctx, group.DissolveGroup{Actor: who(acme, owner), Group: gid}); err != nil {
		t.Fatal(err)
	}
	for _, cl := range clients {
		if got := cl.waitInfo(grp, "dissolved"); got.Src != "" {
			t.Errorf("%s: dissolution info = %+v", cl.name, got)
		}
	}
	if n := a.gw.Hub().Subscribers(acme, topic) + b.gw.Hub().Subscribers(acme, topic); n != 0 {
		t.Errorf("%d sessions still in %s after its dissolution", n, grp)
	}
	if r := clients[1].pub("late", grp, "late"); r.Code != 403 || r.Reason != "group_dissolved" {
		t.Errorf("pub to the dissolved group = %d %s, want 403 group_dissolved", r.Code, r.Reason)
	}
}

// pausingPolicy holds user's first sub after the policy answered it, until resume is closed.
type pausingPolicy struct {
	ws.Policy
	user    domain.UserID
	checked chan struct{}
	resume  chan struct{}
	once    sync.Once
}

func (p *pausingPolicy) CanSubscribe(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) error {
	err := p.Policy.CanSubscribe(ctx, tenant, user, topic)
	if user == p.user {
		p.once.Do(func() {
			close(p.checked)
			<-p.resume
		})
	}
	return err
}

// TestSubRacingARemovalDoesNotOutliveIt lets X's sub pass the policy, removes X before the sub
// joins the topic, then lets the sub go on: it must not subscribe X on the strength of the answer
// from before the removal.
func TestSubRacingARemovalDoesNotOutliveIt(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	const owner, x domain.UserID = 1, 2
	pause := &pausingPolicy{user: x, checked: make(chan struct{}), resume: make(chan struct{})}
	a := c.fullNodeWith(t, "node-a", func(p ws.Policy) ws.Policy {
		pause.Policy = p
		return pause
	})
	topic := newGroup(t, a.groups, acme, 0, owner, x)
	grp := topic.String()
	ownerA, xA := dial(t, a.node, "owner@a", dialOpts{}), dial(t, a.node, "x@a", dialOpts{})
	ownerA.login(c, owner)
	ownerA.sub(grp)
	xA.login(c, x)
	xA.write(map[string]any{"sub": map[string]any{"id": "racing", "topic": grp}})
	select {
	case <-pause.checked:
	case <-time.After(10 * time.Second):
		t.Fatal("the sub never reached the policy")
	}
	if _, err := a.groups.RemoveMember.Handle(testCtx(t), group.RemoveMember{Actor: who(acme, owner), Group: domain.GroupID(topic.GroupID()), User: x}); err != nil {
		t.Fatal(err)
	}
	ownerA.waitInfo(grp, "removed")
	close(pause.resume)
	if r := xA.ctrl("racing"); r.Code != 403 || r.Reason != "not_member" {
		t.Fatalf("sub racing the removal = %d %s, want 403 not_member", r.Code, r.Reason)
	}
	if n := a.gw.Hub().Subscribers(acme, topic); n != 1 {
		t.Errorf("%d sessions in %s, want the owner's only", n, grp)
	}
	if r := ownerA.pub("after", grp, "after"); r.Code != 202 {
		t.Fatalf("owner's pub = %+v", r)
	}
	ownerA.waitFor("its message", func([]serverFrame) bool { return len(ownerA.contents(grp)) == 1 })
	time.Sleep(100 * time.Millisecond)
	if got := xA.contents(grp); len(got) != 0 {
		t.Errorf("removed user received %q", got)
	}
}

// TestSubOnAnotherNodeRacingARemovalDoesNotOutliveIt lets X's sub on node B pass the policy,
// removes X on node A while no session of B is in the topic yet (so presence does not list B
// for it), waits until node C heard of the removal, then lets the sub go on. The sub must not
// leave X subscribed: once it joined, B is listed for the topic and would get the group's
// later messages, which must not reach X.
func TestSubOnAnotherNodeRacingARemovalDoesNotOutliveIt(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	const owner, x, y, z domain.UserID = 1, 2, 3, 4
	pause := &pausingPolicy{user: x, checked: make(chan struct{}), resume: make(chan struct{})}
	a := c.fullNode(t, "node-a")
	b := c.fullNodeWith(t, "node-b", func(p ws.Policy) ws.Policy {
		pause.Policy = p
		return pause
	})
	cn := c.fullNode(t, "node-c")
	topic := newGroup(t, a.groups, acme, 0, owner, x, y, z)
	grp := topic.String()
	ownerA, xB, zB, yC := dial(t, a.node, "owner@a", dialOpts{}), dial(t, b.node, "x@b", dialOpts{}),
		dial(t, b.node, "z@b", dialOpts{}), dial(t, cn.node, "y@c", dialOpts{})
	ownerA.login(c, owner)
	ownerA.sub(grp)
	yC.login(c, y)
	yC.sub(grp)
	zB.login(c, z)
	xB.login(c, x)
	xB.write(map[string]any{"sub": map[string]any{"id": "racing", "topic": grp}})
	select {
	case <-pause.checked:
	case <-time.After(10 * time.Second):
		t.Fatal("the sub never reached the policy")
	}
	if _, err := a.groups.RemoveMember.Handle(testCtx(t), group.RemoveMember{Actor: who(acme, owner), Group: domain.GroupID(topic.GroupID()), User: x}); err != nil {
		t.Fatal(err)
	}
	// Node A's fanout sent the removal to the other nodes once node C has it.
	yC.waitInfo(grp, "removed")
	close(pause.resume)
	switch r := xB.ctrl("racing"); {
	case r.Code == 403 && r.Reason == "not_member":
	case r.Code == 200: // joined before the removal reached node B, which then ended it
	default:
		t.Fatalf("sub racing the removal on another node = %d %s", r.Code, r.Reason)
	}
	zB.sub(grp)
	if r := ownerA.pub("after", grp, "after"); r.Code != 202 {
		t.Fatalf("owner's pub = %+v", r)
	}
	zB.waitFor("the owner's message", func([]serverFrame) bool { return len(zB.contents(grp)) == 1 })
	time.Sleep(100 * time.Millisecond) // room for a leaked message to arrive
	if got := xB.contents(grp); len(got) != 0 {
		t.Errorf("removed user received %q", got)
	}
	if n := b.gw.Hub().Subscribers(acme, topic); n != 1 {
		t.Errorf("node B has %d sessions in %s, want z's only", n, grp)
	}
}

// TestSubOnAnotherNodeAfterARemovalIsCheckedAfresh removes X on node A while node B, which has
// X's membership cached, holds back the invalidations other nodes send. Once B applied the
// removal to its sessions, X's sub on B must be refused: the removal itself, not only the
// invalidation that travels on its own channel, makes B stop trusting what it cached before it.
func TestSubOnAnotherNodeAfterARemovalIsCheckedAfresh(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	const owner, x, z domain.UserID = 1, 2, 4
	held := make(chan struct{})
	a := c.fullNode(t, "node-a")
	b := c.fullNodeOpts(t, "node-b", fullOpts{held: held})
	t.Cleanup(func() { close(held) })
	topic := newGroup(t, a.groups, acme, 0, owner, x, z)
	grp := topic.String()
	ownerA, xB, zB := dial(t, a.node, "owner@a", dialOpts{}), dial(t, b.node, "x@b", dialOpts{}), dial(t, b.node, "z@b", dialOpts{})
	ownerA.login(c, owner)
	ownerA.sub(grp)
	zB.login(c, z)
	zB.sub(grp)
	xB.login(c, x)
	// X reads the group's history on B: B caches X's membership.
	if r := xB.call("get", map[string]any{"get": map[string]any{"id": "get", "topic": grp}}); r.Code != 200 {
		t.Fatalf("x's get before the removal = %+v", r)
	}
	if _, err := a.groups.RemoveMember.Handle(testCtx(t), group.RemoveMember{Actor: who(acme, owner), Group: domain.GroupID(topic.GroupID()), User: x}); err != nil {
		t.Fatal(err)
	}
	zB.waitInfo(grp, "removed")
	if r := xB.call("late", map[string]any{"sub": map[string]any{"id": "late", "topic": grp}}); r.Code != 403 || r.Reason != "not_member" {
		t.Errorf("x's sub on node B after B applied the removal = %d %s, want 403 not_member", r.Code, r.Reason)
	}
	if r := ownerA.pub("after", grp, "after"); r.Code != 202 {
		t.Fatalf("owner's pub = %+v", r)
	}
	zB.waitFor("the owner's message", func([]serverFrame) bool { return len(zB.contents(grp)) == 1 })
	time.Sleep(100 * time.Millisecond) // room for a leaked message to arrive
	if got := xB.contents(grp); len(got) != 0 {
		t.Errorf("removed user received %q", got)
	}
}

// TestBlockedPeerStillReadsTheDirectHistory: a user the peer blocks may no longer subscribe to
// their 1:1 topic, yet may still read its history and move their read mark in it, as over REST.
func TestBlockedPeerStillReadsTheDirectHistory(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.fullNode(t, "node-a")
	const blocker, blocked domain.UserID = 5, 6
	topic, err := domain.DirectTopic(blocker, blocked)
	if err != nil {
		t.Fatal(err)
	}
	p2p := topic.String()
	u5, u6 := dial(t, a.node, "blocker", dialOpts{}), dial(t, a.node, "blocked", dialOpts{})
	u5.login(c, blocker)
	u6.login(c, blocked)
	if r := u5.pub("hello", p2p, "hello"); r.Code != 202 {
		t.Fatalf("pub before the block = %+v", r)
	}
	if _, err := a.groups.BlockUser.Handle(testCtx(t), group.BlockUser{Actor: who(acme, blocker), Peer: blocked}); err != nil {
		t.Fatal(err)
	}
	if r := u6.call("s", fmt.Sprintf(`{"sub":{"id":"s","topic":%q}}`, p2p)); r.Code != 403 || r.Reason != "blocked" {
		t.Fatalf("blocked user's sub = %+v, want 403 blocked", r)
	}
	r := u6.call("g", fmt.Sprintf(`{"get":{"id":"g","topic":%q,"after_seq":"0"}}`, p2p))
	if r.Code != 200 || r.Params["count"] != float64(1) {
		t.Fatalf("blocked user's get = %+v, want the one message from before the block", r)
	}
	if got := u6.data(); len(got) != 1 || string(got[0].Content) != `"hello"` {
		t.Fatalf("history frames = %+v", got)
	}
	u6.write(fmt.Sprintf(`{"note":{"topic":%q,"what":"read","seq":"1"}}`, p2p))
	if r := u6.call("pg", `{"ping":{"id":"pg"}}`); r.Code != 200 {
		t.Fatal(r)
	}
	for _, f := range u6.snapshot() {
		if f.Ctrl != nil && f.Ctrl.ID == "" && f.Ctrl.Code >= 400 {
			t.Fatalf("blocked user's read note refused: %+v", *f.Ctrl)
		}
	}
	marks, err := c.store.ReadStream(testCtx(t), acme, domain.ReadMarksStreamID(topic, blocked), 0, 10)
	if err != nil || len(marks) != 1 {
		t.Fatalf("read marks of the blocked user = %d events, %v", len(marks), err)
	}
}

// TestBlockedPeersReceiptsDoNotReachTheBlocker: a user the peer blocks may still move their read
// and receive marks in the 1:1 topic, but the blocker, subscribed to it, no longer hears of them,
// as it hears no typing from them; before the block it did.
func TestBlockedPeersReceiptsDoNotReachTheBlocker(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.fullNode(t, "node-a")
	const blocker, blocked domain.UserID = 5, 6
	topic, err := domain.DirectTopic(blocker, blocked)
	if err != nil {
		t.Fatal(err)
	}
	p2p := topic.String()
	u5, u6 := dial(t, a.node, "blocker", dialOpts{}), dial(t, a.node, "blocked", dialOpts{})
	u5.login(c, blocker)
	u6.login(c, blocked)
	u5.sub(p2p)
	if r := u5.pub("hello", p2p, "hello"); r.Code != 202 {
		t.Fatalf("pub before the block = %+v", r)
	}
	u6.write(fmt.Sprintf(`{"note":{"topic":%q,"what":"recv","seq":"1"}}`, p2p))
	if got := u5.waitInfo(p2p, "recv"); got.From != blocked.String() || got.Seq != "1" {
		t.Fatalf("receipt before the block = %+v", got)
	}

	if _, err := a.groups.BlockUser.Handle(testCtx(t), group.BlockUser{Actor: who(acme, blocker), Peer: blocked}); err != nil {
		t.Fatal(err)
	}
	u5.waitInfo(p2p, "blocked")
	for _, what := range []string{"read", "kp"} {
		u6.write(fmt.Sprintf(`{"note":{"topic":%q,"what":%q,"seq":"1"}}`, p2p, what))
	}
	if r := u6.call("pg", `{"ping":{"id":"pg"}}`); r.Code != 200 {
		t.Fatal(r)
	}
	marks, err := c.store.ReadStream(testCtx(t), acme, domain.ReadMarksStreamID(topic, blocked), 0, 10)
	if err != nil || len(marks) != 2 {
		t.Fatalf("read marks of the blocked user = %d events, %v; want the receive and the read", len(marks), err)
	}
	time.Sleep(150 * time.Millisecond) // room for a leaked note to arrive
	for _, i := range u5.infos(p2p) {
		if i.From == blocked.String() && i.What != "recv" {
			t.Errorf("blocker heard %q from the user it blocks: %+v", i.What, i)
		}
	}
}
