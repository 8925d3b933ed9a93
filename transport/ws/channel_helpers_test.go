package ws_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/tenantdb"
	"github.com/imledger/imledger/transport/userchan"
)

// bothCommits hands every commit to two listeners: the fanout and the channel.
type bothCommits struct{ a, b message.CommitListener }

func (c bothCommits) MessagesCommitted(ctx context.Context, msgs []message.CommittedMessage) {
	c.a.MessagesCommitted(ctx, msgs)
	c.b.MessagesCommitted(ctx, msgs)
}

// readModel gives the cluster the business read model of tenant acme in a MySQL database of its
// own: what a channel session starts from. project fills it from the event store.
func (c *cluster) readModel(t testing.TB) {
	t.Helper()
	testenv.MySQLServer(t)
	prefix := testenv.UniqueName("wsch")
	r, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN, DatabaseTemplate: prefix + "_" + tenantdb.TenantPlaceholder})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	testenv.DropMySQLDatabasesAtCleanup(t, prefix)
	if err := r.Provision(testCtx(t), acme); err != nil {
		t.Fatal(err)
	}
	if c.biz, err = business.NewStore(r, c.rdb, business.Config{KeyPrefix: c.prefix}); err != nil {
		t.Fatal(err)
	}
}

// project applies every event of the store to the business read model, as its projector would.
func (c *cluster) project(t testing.TB) {
	t.Helper()
	ctx := testCtx(t)
	var after int64
	for {
		evs, err := c.store.ReadAll(ctx, domain.EventFilter{Tenant: acme}, after, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return
		}
		if _, err := c.biz.ApplyBatch(ctx, acme, "ws-test", business.DefaultTables(), evs); err != nil {
			t.Fatal(err)
		}
		after = evs[len(evs)-1].Position
	}
}

// channelFor is node n's per-user channel: its log over the cluster's Redis, delivering through
// n's fanout, its directory the cluster's read model.
func (c *cluster) channelFor(t testing.TB, n *node, cfg userchan.Config) *userchan.Channel {
	t.Helper()
	cfg.KeyPrefix = c.prefix
	l, err := userchan.NewLog(c.rdb, n.pres.ChannelNodesKey, cfg)
	if err != nil {
		t.Fatal(err)
	}
	deps := userchan.Deps{Log: l, Publisher: n.fan}
	if c.biz != nil {
		deps.Directory = c.biz
	}
	ch, err := userchan.New(deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go func() { _ = ch.Run(ctx) }()
	return ch
}

// subMe subscribes to the channel and returns the answer's params; it fails the test on
// anything but 200.
func (cl *client) subMe() map[string]any {
	cl.t.Helper()
	id := fmt.Sprintf("sub-me-%d", time.Now().UnixNano())
	r := cl.call(id, map[string]any{"sub": map[string]any{"id": id, "topic": "me"}})
	if r.Code != 200 {
		cl.t.Fatalf("%s: sub me = %+v", cl.name, r)
	}
	return r.Params
}

// me returns the channel frames received so far.
func (cl *client) me() []meFrame {
	var out []meFrame
	for _, f := range cl.snapshot() {
		if f.Me != nil {
			out = append(out, *f.Me)
		}
	}
	return out
}

// items returns the logged channel items received so far (those with a seq).
func (cl *client) items() []meFrame {
	var out []meFrame
	for _, m := range cl.me() {
		if m.Seq != "" {
			out = append(out, m)
		}
	}
	return out
}

// waitItem waits for a logged item of kind what (and topic and src, when not empty) and
// returns it.
func (cl *client) waitItem(what, topic, src string) meFrame {
	cl.t.Helper()
	var got meFrame
	cl.waitFor("item "+what+" "+topic+" "+src, func([]serverFrame) bool {
		for _, m := range cl.items() {
			if m.What == what && (topic == "" || m.Topic == topic) && (src == "" || m.Src == src) {
				got = m
				return true
			}
		}
		return false
	})
	return got
}
