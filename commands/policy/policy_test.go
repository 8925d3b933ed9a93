package policy_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/policy"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
)

// The group rules: members post; non-members, muted members, plain members under mute-all, and
// everyone in a dissolved group are refused with the domain's reasons; the owner and admins are
// exempt from mute-all; a mute ends by the clock without any invalidation.
func TestPolicyGroupRules(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	ctx := testCtx(t)
	tenant := domain.MustTenantID("acme")
	var clock struct {
		sync.Mutex
		now time.Time
	}
	clock.now = time.Now()
	now := func() time.Time { clock.Lock(); defer clock.Unlock(); return clock.now }
	pol := newPolicy(t, policy.Deps{Store: store, Now: now}, policy.Config{})
	h := newHandlers(t, store, pol)
	owner := who(tenant, 1)
	res := must[group.Result](t)(h.CreateGroup.Handle(ctx, group.CreateGroup{Actor: owner,
		Profile: must[domain.GroupProfile](t)(domain.NewGroupProfile("g", "", ""))}))
	g, topic := res.Group, res.Topic
	for _, u := range []domain.UserID{2, 3, 4} {
		must[group.Result](t)(h.JoinGroup.Handle(ctx, group.JoinGroup{Actor: who(tenant, u), Group: g}))
	}
	must[group.Result](t)(h.SetRole.Handle(ctx, group.SetRole{Actor: owner, Group: g, User: 2, Role: domain.RoleAdmin}))
	must[group.Result](t)(h.MuteMember.Handle(ctx, group.MuteMember{Actor: owner, Group: g, User: 4, Until: now().Add(time.Hour)}))

	check := func(when string, want map[domain.UserID]string) {
		t.Helper()
		for u, reason := range want {
			err := pol.CanSend(ctx, tenant, u, topic)
			if got := reasonOf(err); got != reason || (reason == "" && err != nil) {
				t.Errorf("%s: user %d: %v, want %q", when, u, err, reason)
			}
		}
	}
	check("open group", map[domain.UserID]string{1: "", 2: "", 3: "", 4: domain.ReasonMuted, 9: domain.ReasonNotMember})

	clock.Lock()
	clock.now = clock.now.Add(2 * time.Hour)
	clock.Unlock()
	check("after the mute ran out", map[domain.UserID]string{4: ""})

	muteAll := domain.DefaultGroupSettings()
	muteAll.MuteAll = true
	must[group.Result](t)(h.UpdateGroupSettings.Handle(ctx, group.UpdateGroupSettings{Actor: owner, Group: g, Settings: muteAll}))
	check("mute-all", map[domain.UserID]string{1: "", 2: "", 3: domain.ReasonGroupMuted, 4: domain.ReasonGroupMuted})

	must[group.Result](t)(h.DissolveGroup.Handle(ctx, group.DissolveGroup{Actor: owner, Group: g}))
	check("dissolved", map[domain.UserID]string{1: domain.ReasonGroupDissolved, 3: domain.ReasonGroupDissolved})

	if err := pol.CanSend(ctx, tenant, 1, groupTopic(t, g+1)); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("group never created: %v, want ErrNotFound", err)
	}
}

// A removal takes effect on the node that ran it the moment the command returns (its handlers
// invalidate this node's policy), on another node as soon as the invalidation channel delivers
// the key (that node's TTL is a minute, so nothing else can explain the refusal), and on a node
// without the channel within its TTL. Meanwhile warm checks cost no store reads.
func TestPolicyRemovalTakesEffectAcrossNodes(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	ctx := testCtx(t)
	tenant := domain.MustTenantID("acme")
	channel := &bus{}

	nodeA := newPolicy(t, policy.Deps{Store: store}, policy.Config{TTL: time.Minute})
	nodeB := newPolicy(t, policy.Deps{Store: store, Source: channel}, policy.Config{TTL: time.Minute})
	const ttlC = 300 * time.Millisecond
	nodeC := newPolicy(t, policy.Deps{Store: store}, policy.Config{TTL: ttlC})
	var wg sync.WaitGroup
	runCtx, stop := context.WithCancel(ctx)
	wg.Add(1)
	go func() { defer wg.Done(); _ = nodeB.Run(runCtx) }()
	t.Cleanup(func() { stop(); wg.Wait() })
	eventually(t, 5*time.Second, "node B subscribes", func() bool { return channel.subscribers() == 1 })

	h := newHandlers(t, store, policy.Broadcaster{Local: nodeA, Remote: channel})
	owner := who(tenant, 1)
	res := must[group.Result](t)(h.CreateGroup.Handle(ctx, group.CreateGroup{Actor: owner,
		Profile: must[domain.GroupProfile](t)(domain.NewGroupProfile("g", "", ""))}))
	g, topic := res.Group, res.Topic
	must[group.Result](t)(h.JoinGroup.Handle(ctx, group.JoinGroup{Actor: who(tenant, 3), Group: g}))

	nodes := map[string]*policy.Policy{"A": nodeA, "B": nodeB, "C": nodeC}
	for name, n := range nodes {
		if err := n.CanSend(ctx, tenant, 3, topic); err != nil {
			t.Fatalf("node %s: member refused: %v", name, err)
		}
	}
	readsBefore := nodeA.Stats().Reads
	for range 1000 {
		if err := nodeA.CanSend(ctx, tenant, 3, topic); err != nil {
			t.Fatal(err)
		}
	}
	if n := nodeA.Stats().Reads - readsBefore; n != 0 {
		t.Errorf("1000 warm checks read the store %d times", n)
	}

	must[group.Result](t)(h.RemoveMember.Handle(ctx, group.RemoveMember{Actor: owner, Group: g, User: 3}))
	removed := time.Now()
	if err := nodeA.CanSend(ctx, tenant, 3, topic); reasonOf(err) != domain.ReasonNotMember {
		t.Errorf("node A right after the removal returned: %v, want not_member", err)
	}
	took := eventually(t, 5*time.Second, "node B refuses after the invalidation", func() bool {
		return reasonOf(nodeB.CanSend(ctx, tenant, 3, topic)) == domain.ReasonNotMember
	})
	t.Logf("node B refused %s after the removal returned (channel delivery)", took)
	eventually(t, ttlC+200*time.Millisecond-time.Since(removed), "node C refuses within its TTL", func() bool {
		return reasonOf(nodeC.CanSend(ctx, tenant, 3, topic)) == domain.ReasonNotMember
	})
	if n := time.Since(removed); n > ttlC+200*time.Millisecond {
		t.Errorf("node C refused %s after the removal, TTL %s", n, ttlC)
	}
}

// 1:1 topics: a user the peer blocks is refused, the blocker is not, a third user is not a
// party; the block takes effect the moment the command returns and lifts the same way.
func TestPolicyDirectTopics(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	ctx := testCtx(t)
	tenant := domain.MustTenantID("acme")
	pol := newPolicy(t, policy.Deps{Store: store}, policy.Config{TTL: time.Minute})
	h := newHandlers(t, store, pol)
	topic := must[domain.Topic](t)(domain.DirectTopic(1, 2))
	// A peer who does not exist in the tenant is not found, until they register: the answer
	// of a moment ago is not trusted for them.
	if err := pol.CanSend(ctx, tenant, 1, topic); !errors.Is(err, group.ErrUnknownUser) || !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a peer who does not exist: %v, want ErrUnknownUser", err)
	}
	storetest.RegisterUsers(t, store, tenant, 1, 2, 3)
	if err := pol.CanSend(ctx, tenant, 1, topic); err != nil {
		t.Fatalf("strangers: %v", err)
	}
	must[group.Result](t)(h.BlockUser.Handle(ctx, group.BlockUser{Actor: who(tenant, 2), Peer: 1}))
	if err := pol.CanSend(ctx, tenant, 1, topic); reasonOf(err) != domain.ReasonBlocked {
		t.Errorf("blocked sender: %v, want blocked", err)
	}
	if err := pol.CanSend(ctx, tenant, 2, topic); err != nil {
		t.Errorf("the blocker sends: %v", err)
	}
	if err := pol.CanSend(ctx, tenant, 3, topic); reasonOf(err) != domain.ReasonNotParty {
		t.Errorf("third user: %v, want not_party", err)
	}
	must[group.Result](t)(h.UnblockUser.Handle(ctx, group.UnblockUser{Actor: who(tenant, 2), Peer: 1}))
	if err := pol.CanSend(ctx, tenant, 1, topic); err != nil {
		t.Errorf("after the unblock: %v", err)
	}
}

// A user of another tenant is refused on a group of this tenant, whether the id exists in the
// other tenant or not, and a block in one tenant does not exist in the other.
func TestPolicyTenantIsolation(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	ctx := testCtx(t)
	acme, beta := domain.MustTenantID("acme"), domain.MustTenantID("beta")
	pol := newPolicy(t, policy.Deps{Store: store}, policy.Config{TTL: time.Minute})
	h := newHandlers(t, store, pol)
	profile := must[domain.GroupProfile](t)(domain.NewGroupProfile("g", "", ""))
	for _, tenant := range []domain.TenantID{acme, beta} {
		must[group.Result](t)(h.CreateGroup.Handle(ctx, group.CreateGroup{Actor: who(tenant, 1), Group: 42, Profile: profile}))
	}
	must[group.Result](t)(h.CreateGroup.Handle(ctx, group.CreateGroup{Actor: who(acme, 1), Group: 77, Profile: profile}))
	storetest.RegisterUsers(t, store, acme, 1, 2, 3)
	storetest.RegisterUsers(t, store, beta, 2, 3)
	for _, g := range []domain.GroupID{42, 77} {
		must[group.Result](t)(h.JoinGroup.Handle(ctx, group.JoinGroup{Actor: who(acme, 3), Group: g}))
	}
	must[group.Result](t)(h.BlockUser.Handle(ctx, group.BlockUser{Actor: who(acme, 2), Peer: 3}))

	if err := pol.CanSend(ctx, acme, 3, groupTopic(t, 42)); err != nil {
		t.Fatalf("acme member: %v", err)
	}
	if err := pol.CanSend(ctx, beta, 3, groupTopic(t, 42)); reasonOf(err) != domain.ReasonNotMember {
		t.Errorf("beta user 3 on beta's group 42: %v, want not_member", err)
	}
	if err := pol.CanSend(ctx, beta, 3, groupTopic(t, 77)); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("beta user 3 on acme-only group 77: %v, want ErrNotFound", err)
	}
	direct := must[domain.Topic](t)(domain.DirectTopic(2, 3))
	if err := pol.CanSend(ctx, acme, 3, direct); reasonOf(err) != domain.ReasonBlocked {
		t.Errorf("acme block: %v", err)
	}
	if err := pol.CanSend(ctx, beta, 3, direct); err != nil {
		t.Errorf("beta has no block: %v", err)
	}
}

// Keys survive their wire form; malformed ones are rejected.
func TestParseKey(t *testing.T) {
	t.Parallel()
	k := policy.Key{Tenant: domain.MustTenantID("acme"), StreamID: "member:7:9"}
	if got, err := policy.ParseKey(k.String()); err != nil || got != k {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{"", "acme", "acme/", "/group:1", "ACME/group:1"} {
		if _, err := policy.ParseKey(bad); !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", bad, err)
		}
	}
}

// Nobody mutes the owner, so a member muted when the ownership is handed to them is not muted as
// the owner: they post at once. Otherwise nobody could lift the mute (the owner may not unmute
// themself, admins may not unmute the owner) and the group's owner could not post in it.
func TestPolicyNewOwnerIsNotKeptMuted(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	ctx := testCtx(t)
	tenant := domain.MustTenantID("acme")
	pol := newPolicy(t, policy.Deps{Store: store}, policy.Config{})
	h := newHandlers(t, store, pol)
	owner := who(tenant, 1)
	res := must[group.Result](t)(h.CreateGroup.Handle(ctx, group.CreateGroup{Actor: owner,
		Profile: must[domain.GroupProfile](t)(domain.NewGroupProfile("g", "", ""))}))
	g, topic := res.Group, res.Topic
	must[group.Result](t)(h.JoinGroup.Handle(ctx, group.JoinGroup{Actor: who(tenant, 2), Group: g}))
	must[group.Result](t)(h.MuteMember.Handle(ctx, group.MuteMember{Actor: owner, Group: g, User: 2, Until: time.Now().Add(time.Hour)}))
	if err := pol.CanSend(ctx, tenant, 2, topic); reasonOf(err) != domain.ReasonMuted {
		t.Fatalf("muted member: %v, want %s", err, domain.ReasonMuted)
	}
	must[group.Result](t)(h.TransferOwnership.Handle(ctx, group.TransferOwnership{Actor: owner, Group: g, To: 2}))
	if err := pol.CanSend(ctx, tenant, 2, topic); err != nil {
		t.Errorf("the new owner, muted as a member before: %v", err)
	}
	if _, err := h.UnmuteMember.Handle(ctx, group.UnmuteMember{Actor: who(tenant, 2), Group: g, User: 2}); reasonOf(err) != domain.ReasonSelfAction {
		t.Errorf("the new owner unmutes themself: %v, want %s", err, domain.ReasonSelfAction)
	}
}
