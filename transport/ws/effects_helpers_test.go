package ws_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/policy"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/rest"
	"github.com/imledger/imledger/transport/userchan"
	"github.com/imledger/imledger/transport/ws"
)

// policyTTL is how long the nodes' policies trust a cached state without an invalidation: long
// enough that a refusal inside a test can only come from the invalidation the handlers sent.
const policyTTL = time.Minute

// fullNode is a gateway wired as imledger serve wires it: a send policy over a cache of folded
// states that other nodes invalidate over Redis, a read policy over the same cache, and group
// handlers whose Invalidator tells this node's policy and the other nodes, and whose Notifier is
// the gateway's realtime effects over this node's fanout.
type fullNode struct {
	*node
	policy *policy.Policy
	groups *group.Handlers
}

func (c *cluster) fullNode(t testing.TB, id string) *fullNode {
	t.Helper()
	return c.fullNodeWith(t, id, nil)
}

// fullNodeWith is fullNode with the gateway's policy wrapped by wrap (nil: not wrapped).
func (c *cluster) fullNodeWith(t testing.TB, id string, wrap func(ws.Policy) ws.Policy) *fullNode {
	t.Helper()
	return c.fullNodeOpts(t, id, fullOpts{wrap: wrap})
}

// fullOpts vary a fullNode.
type fullOpts struct {
	wrap func(ws.Policy) ws.Policy // wraps the gateway's policy; nil: not wrapped
	// held, when set, holds the invalidations other nodes send until it is closed.
	held chan struct{}
	// channel, when set, serves the per-user channel with this config (see readModel) and logs
	// the group handlers' changes on it.
	channel *userchan.Config
}

// fullNodeOpts is fullNode as o says.
func (c *cluster) fullNodeOpts(t testing.TB, id string, o fullOpts) *fullNode {
	t.Helper()
	wrap := o.wrap
	loader, err := group.NewLoader(c.store, group.LoaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	inval := redisInval{rdb: c.rdb, channel: c.prefix + "policy:invalidate", node: id}
	var source policy.Source = inval
	if o.held != nil {
		source = heldSource{Source: inval, held: o.held}
	}
	pol, err := policy.New(policy.Deps{Loader: loader, Source: source}, policy.Config{TTL: policyTTL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	before := inval.subscribers(t)
	go func() { _ = pol.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for inval.subscribers(t) <= before {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the policy did not subscribe to invalidations", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var gwPolicy ws.Policy = ws.MemberPolicy{Read: rest.MemberReadPolicy{Members: loaderMembers{loader}}, Send: pol}
	if wrap != nil {
		gwPolicy = wrap(gwPolicy)
	}
	// Control messages that end subscriptions mark the states they concern stale first.
	local := func(h *ws.Hub) fanout.Deliverer {
		return ws.Invalidating{Next: h, Invalidate: func(tenant domain.TenantID, ids []string) { pol.Invalidate(ctx, tenant, ids) }}
	}
	n := c.node(t, id, nodeOpts{policy: gwPolicy, local: local, channel: o.channel})
	notifier, err := ws.NewNotifier(n.fan, nil)
	if err != nil {
		t.Fatal(err)
	}
	gdeps := group.Deps{Store: c.store, Notifier: notifier, Invalidator: policy.Broadcaster{Local: pol, Remote: inval}}
	if n.channel != nil {
		gdeps.Changes = n.channel
	}
	groups, err := group.New(gdeps, group.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &fullNode{node: n, policy: pol, groups: groups}
}

// heldSource passes other nodes' invalidations on once held is closed.
type heldSource struct {
	policy.Source
	held chan struct{}
}

func (h heldSource) Subscribe(ctx context.Context, fn func(policy.Key)) error {
	return h.Source.Subscribe(ctx, func(k policy.Key) {
		select {
		case <-h.held:
		case <-ctx.Done():
			return
		}
		fn(k)
	})
}

// loaderMembers answers membership from the policy's cache, trusting a state for policyTTL.
type loaderMembers struct{ loader *group.Loader }

func (m loaderMembers) IsMember(ctx context.Context, tenant domain.TenantID, g domain.GroupID, u domain.UserID) (bool, error) {
	s, err := m.loader.Membership(ctx, tenant, g, u, policyTTL)
	if err != nil {
		return false, err
	}
	return s.IsMember(), nil
}

// redisInval carries policy invalidations between the test's nodes over Redis Pub/Sub: the
// publishing node's id, then one key per line; a node skips its own messages.
type redisInval struct {
	rdb     *redis.Client
	channel string
	node    string
}

func (r redisInval) Publish(ctx context.Context, keys []policy.Key) error {
	lines := []string{r.node}
	for _, k := range keys {
		lines = append(lines, k.String())
	}
	return r.rdb.Publish(ctx, r.channel, strings.Join(lines, "\n")).Err()
}

func (r redisInval) Subscribe(ctx context.Context, fn func(policy.Key)) error {
	ps := r.rdb.Subscribe(ctx, r.channel)
	defer ps.Close()
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stop()
	for {
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil {
			return err
		}
		lines := strings.Split(msg.Payload, "\n")
		if lines[0] == r.node {
			continue
		}
		for _, l := range lines[1:] {
			if k, err := policy.ParseKey(l); err == nil {
				fn(k)
			}
		}
	}
}

func (r redisInval) subscribers(t testing.TB) int64 {
	t.Helper()
	n, err := r.rdb.PubSubNumSub(testCtx(t), r.channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n[r.channel]
}

// newGroup creates a group owned by owner in tenant, with the given id (0: drawn), and joins the
// members; it returns the group's topic.
func newGroup(t testing.TB, h *group.Handlers, tenant domain.TenantID, id domain.GroupID, owner domain.UserID, members ...domain.UserID) domain.Topic {
	t.Helper()
	ctx := testCtx(t)
	profile, err := domain.NewGroupProfile("effects", "", "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.CreateGroup.Handle(ctx, group.CreateGroup{Actor: who(tenant, owner), Group: id, Profile: profile})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if _, err := h.JoinGroup.Handle(ctx, group.JoinGroup{Actor: who(tenant, m), Group: res.Group}); err != nil {
			t.Fatal(err)
		}
	}
	return res.Topic
}

func who(tenant domain.TenantID, u domain.UserID) domain.Principal {
	return domain.Principal{Tenant: tenant, User: u}
}

// loginAs logs cl in as user of tenant.
func (cl *client) loginAs(c *cluster, tenant domain.TenantID, user domain.UserID) {
	cl.t.Helper()
	storetest.RegisterUsers(cl.t, c.store, tenant, user)
	tok, err := c.tokens.Issue(tenant, user, time.Hour)
	if err != nil {
		cl.t.Fatal(err)
	}
	if r := cl.call("login", map[string]any{"login": map[string]any{"id": "login", "token": tok}}); r.Code != 200 {
		cl.t.Fatalf("%s: login = %+v", cl.name, r)
	}
}

// pub sends content to topic as frame id and returns the answer.
func (cl *client) pub(id, topic, content string) ctrlFrame {
	cl.t.Helper()
	return cl.call(id, fmt.Sprintf(`{"pub":{"id":%q,"topic":%q,"client_msg_id":%q,"content":%q}}`, id, topic, id, content))
}

// infos returns the info frames of topic received so far.
func (cl *client) infos(topic string) []infoFrame {
	var out []infoFrame
	for _, f := range cl.snapshot() {
		if f.Info != nil && f.Info.Topic == topic {
			out = append(out, *f.Info)
		}
	}
	return out
}

// waitInfo waits for an info frame of topic saying what and returns it.
func (cl *client) waitInfo(topic, what string) infoFrame {
	cl.t.Helper()
	var got infoFrame
	cl.waitFor("info "+what+" in "+topic, func([]serverFrame) bool {
		for _, i := range cl.infos(topic) {
			if i.What == what {
				got = i
				return true
			}
		}
		return false
	})
	return got
}

// contents returns the contents of the data frames of topic received so far, in order.
func (cl *client) contents(topic string) []string {
	var out []string
	for _, d := range cl.data() {
		if d.Topic == topic {
			out = append(out, strings.Trim(string(d.Content), `"`))
		}
	}
	return out
}

// afterInfo reports the data frames of topic cl received after its info frame saying what.
func (cl *client) afterInfo(topic, what string) []string {
	var out []string
	seen := false
	for _, f := range cl.snapshot() {
		switch {
		case f.Info != nil && f.Info.Topic == topic && f.Info.What == what:
			seen = true
		case seen && f.Data != nil && f.Data.Topic == topic:
			out = append(out, string(f.Data.Content))
		}
	}
	return out
}
