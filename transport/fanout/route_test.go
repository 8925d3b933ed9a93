package fanout_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/redisscript"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/presence"
)

// countingFinder counts the node lists a fanout reads in round trips of its own.
type countingFinder struct {
	*presence.Store
	lookups atomic.Int64
}

func (c *countingFinder) NodesForTopics(ctx context.Context, refs []presence.TopicRef) ([][]string, error) {
	c.lookups.Add(1)
	return c.Store.NodesForTopics(ctx, refs)
}

// TestFreshRouteSkipsTheLookupAndAStaleOneIsReadAgain: a committed message whose route the
// sequencer read (QueueRoutes, in a round trip of its own here) goes to the nodes it names without
// another read; one whose route is older than RouteMaxAge is sent by a fresh read.
func TestFreshRouteSkipsTheLookupAndAStaleOneIsReadAgain(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rdb, prefix := testenv.Redis(t)
	grp, _ := domain.GroupTopic(1)
	b := newNode(t, rdb, prefix, "node-b")
	b.join(t, 2, grp)

	pres, err := presence.New(presence.Deps{Redis: rdb}, presence.Config{KeyPrefix: prefix, NodeID: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	finder := &countingFinder{Store: pres}
	a := &recorder{}
	fan, err := fanout.New(fanout.Deps{Redis: rdb, Nodes: finder, Local: a}, fanout.Config{KeyPrefix: prefix, NodeID: "node-a", Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := fan.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fan.Close() })

	var read func() []*message.Route
	if err := redisscript.Pipelined(ctx, rdb, func(batch *redisscript.Batch) {
		read = fan.QueueRoutes(batch, []message.TopicRef{{Tenant: acme, Topic: grp}})
	}); err != nil {
		t.Fatal(err)
	}
	routes := read()
	if len(routes) != 1 || routes[0] == nil || !slices.Equal(routes[0].Nodes, []string{"node-b"}) {
		t.Fatalf("routes = %+v, want node-b's", routes)
	}
	commits := fanout.Commits{Publisher: fan}
	msg := func(seq int64, r *message.Route) []message.CommittedMessage {
		content, _ := domain.NewContent([]byte(`"hi"`), 0)
		return []message.CommittedMessage{{Tenant: acme, Topic: grp, From: 1, Seq: seq, MessageID: "m", MsgType: domain.MsgText,
			Content: content, SentAt: time.Now().UTC(), Route: r}}
	}
	commits.MessagesCommitted(ctx, msg(1, routes[0]))
	waitFor(t, "node b to receive seq 1", func() bool { return len(b.got.snapshot()) == 1 })
	if n := finder.lookups.Load(); n != 0 {
		t.Errorf("a message with a fresh route read its nodes again (%d reads)", n)
	}
	// A fresh route that names no node is one too: nothing is read, and b does not get seq 2.
	commits.MessagesCommitted(ctx, msg(2, &message.Route{ReadAt: time.Now()}))
	// A route from before b's member came online (it names no node) and too old to trust.
	stale := &message.Route{Nodes: []string{}, ReadAt: time.Now().Add(-2 * fanout.RouteMaxAge)}
	commits.MessagesCommitted(ctx, msg(3, stale))
	waitFor(t, "node b to receive seq 3", func() bool { return len(b.got.snapshot()) == 2 })
	if n := finder.lookups.Load(); n != 1 {
		t.Errorf("seqs 2 and 3 made %d reads of their nodes, want 1 (the stale route's)", n)
	}
	if got := b.got.snapshot(); got[0].Seq != 1 || got[1].Seq != 3 {
		t.Errorf("node b received seqs %d, %d; want 1, 3", got[0].Seq, got[1].Seq)
	}
	if n := len(a.snapshot()); n != 3 {
		t.Errorf("node a delivered %d messages locally, want 3", n)
	}
}
