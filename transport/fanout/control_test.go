package fanout_test

import (
	"context"
	"testing"
	"time"

	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/presence"
)

// TestControlReachesNodesWithMembersInOrder sends data, a control message that ends a
// subscription and more data of one topic from node a: node b, which has a member, receives all
// three in that order, the control message with every field; node c, which has none, receives
// the control message alone (it may have a session subscribing while the change commits).
func TestControlReachesNodesWithMembersInOrder(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	grp := mustTopic(t, "grp5")
	a := newNode(t, rdb, prefix, "node-a")
	b := newNode(t, rdb, prefix, "node-b")
	c := newNode(t, rdb, prefix, "node-c")
	b.join(t, 2, grp)
	c.join(t, 3, mustTopic(t, "grp6"))

	a.fan.Publish(&fanout.Message{Kind: fanout.KindData, Tenant: acme, Topic: grp, From: 1, Seq: 1})
	ctl := &fanout.Message{Kind: fanout.KindControl, Tenant: acme, Topic: grp, From: 1, Src: 2, What: "removed",
		Drop: fanout.DropUser, TS: time.Now().UTC()}
	if err := a.fan.PublishControl(testCtx(t), ctl); err != nil {
		t.Fatal(err)
	}
	a.fan.Publish(&fanout.Message{Kind: fanout.KindData, Tenant: acme, Topic: grp, From: 1, Seq: 2})
	waitFor(t, "node b to receive three messages", func() bool { return len(b.got.snapshot()) >= 3 })

	got := b.got.snapshot()
	if got[0].Seq != 1 || got[2].Seq != 2 {
		t.Fatalf("node b received seqs %d, _, %d: out of order", got[0].Seq, got[2].Seq)
	}
	m := got[1]
	if m.Kind != fanout.KindControl || m.Tenant != acme || m.Topic != grp || m.From != 1 || m.Src != 2 ||
		m.What != "removed" || m.Drop != fanout.DropUser || !m.TS.Equal(ctl.TS) {
		t.Fatalf("control message arrived as %+v", m)
	}
	if local := a.got.snapshot(); len(local) != 3 || local[1] != ctl {
		t.Errorf("node a delivered %d messages locally, want the three in order", len(local))
	}
	waitFor(t, "node c to receive the control message", func() bool { return len(c.got.snapshot()) >= 1 })
	time.Sleep(50 * time.Millisecond)
	if got := c.got.snapshot(); len(got) != 1 || got[0].Kind != fanout.KindControl || got[0].Src != 2 {
		t.Errorf("node c, without members of grp5, received %d messages, want the control message alone", len(got))
	}
	if got := a.got.snapshot(); len(got) != 3 {
		t.Errorf("node a delivered %d messages, want its own three only once", len(got))
	}
}

// TestPublishControlWaitsForRoom fills a worker's queue: Publish drops, PublishControl waits and
// fails only when its context ends, having delivered locally either way.
func TestPublishControlWaitsForRoom(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	pres, err := presence.New(presence.Deps{Redis: rdb}, presence.Config{KeyPrefix: prefix, NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	got := &recorder{}
	// Not started: nothing drains the one-slot queue.
	f, err := fanout.New(fanout.Deps{Redis: rdb, Nodes: pres, Local: got}, fanout.Config{KeyPrefix: prefix, NodeID: "n1",
		Workers: 1, QueueSize: 1, PublishTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	grp := mustTopic(t, "grp1")
	ctl := func() *fanout.Message {
		return &fanout.Message{Kind: fanout.KindControl, Tenant: acme, Topic: grp, Src: 2, What: "removed", Drop: fanout.DropUser}
	}
	if err := f.PublishControl(testCtx(t), ctl()); err != nil {
		t.Fatalf("PublishControl with room: %v", err)
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := f.PublishControl(ctx, ctl()); err == nil {
		t.Fatal("PublishControl on a full queue succeeded")
	}
	if waited := time.Since(start); waited < 90*time.Millisecond || waited > 900*time.Millisecond {
		t.Errorf("PublishControl gave up after %s, want about the context's 100ms", waited)
	}
	if n := len(got.snapshot()); n != 2 {
		t.Errorf("delivered %d locally, want 2", n)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.PublishControl(testCtx(t), ctl()); err == nil {
		t.Error("PublishControl after Close succeeded")
	}
}
