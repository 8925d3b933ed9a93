package fanout_test

import (
	"testing"
	"time"

	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/fanout"
)

// TestBroadcastReachesEveryNodeOnce: an account message reaches the sending node's sessions at
// once and every other node over the broadcast channel, whether or not they have online members
// of any topic, and the sender does not get its own copy back.
func TestBroadcastReachesEveryNodeOnce(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	a, b, c := newNode(t, rdb, prefix, "a"), newNode(t, rdb, prefix, "b"), newNode(t, rdb, prefix, "c")
	m := &fanout.Message{Kind: fanout.KindAccount, Tenant: acme, TS: time.Now().UTC(),
		Account: &fanout.AccountControl{What: "banned", User: 42, Banned: true, Version: 3, EndSessions: true, Reason: "user_banned"}}
	if err := a.fan.Broadcast(testCtx(t), m); err != nil {
		t.Fatal(err)
	}
	if got := a.got.snapshot(); len(got) != 1 || got[0].Account.User != 42 {
		t.Fatalf("sender's own delivery: %+v", got)
	}
	for _, n := range []*node{b, c} {
		deadline := time.Now().Add(5 * time.Second)
		for len(n.got.snapshot()) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		got := n.got.snapshot()
		if len(got) != 1 || got[0].Kind != fanout.KindAccount || got[0].Account.Version != 3 || !got[0].Account.Banned || got[0].Origin != "a" {
			t.Fatalf("node %s got %+v", n.id, got)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if got := a.got.snapshot(); len(got) != 1 {
		t.Fatalf("the sender got its broadcast back: %d deliveries", len(got))
	}
	// A process without a Fanout (an operator command) reaches every node.
	m2 := &fanout.Message{Kind: fanout.KindAccount, Tenant: acme, Account: &fanout.AccountControl{What: "tenant_changed", Status: "suspended"}}
	if err := fanout.PublishBroadcast(testCtx(t), rdb, prefix, m2); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(a.got.snapshot()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := a.got.snapshot(); len(got) != 2 || got[1].Account.Status != "suspended" {
		t.Fatalf("operator broadcast: %+v", got)
	}
	if err := fanout.PublishBroadcast(testCtx(t), rdb, prefix, &fanout.Message{Kind: fanout.KindData, Tenant: acme}); err == nil {
		t.Fatal("a data message was broadcast")
	}
}
