package seq_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/internal/testenv"
)

// newNode returns an allocator of node id over a fresh key prefix shared with others made from
// the same prefix.
func newNode(t *testing.T, prefix, id string, ttl time.Duration) *seq.Allocator {
	t.Helper()
	rdb, _ := testenv.Redis(t)
	a, err := seq.New(rdb, seq.Config{KeyPrefix: prefix, NodeID: id, HeartbeatTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestPendingClaimRecordsItsOwnerAndSeq(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	a, _, _ := newAllocator(t)
	k := key(t, "grp4", 3, "m1")
	if err := a.Seed(ctx, []seq.TopicFloor{{Tenant: k.Tenant, Topic: k.Topic, Floor: 6}}); err != nil {
		t.Fatal(err)
	}
	nonce := a.NewNonce()
	if other := a.NewNonce(); other == nonce {
		t.Fatalf("two attempts got the nonce %q", nonce)
	}
	got, err := a.MarkDoneAndAllocate(ctx, nil, []seq.Request{{Key: k, Nonce: nonce}}, nil)
	if err != nil || got[0].Outcome != seq.Allocated || got[0].Seq != 7 {
		t.Fatalf("allocate = %+v, %v; want seq 7", got, err)
	}
	c, err := a.Claim(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != seq.StatePending || c.Seq != 7 || c.Owner.Nonce != nonce || !a.Mine(c.Owner) {
		t.Fatalf("pending claim = %+v, want seq 7 owned by this process's attempt %s", c, nonce)
	}
	realloc := a.Reallocate(ctx, []seq.Realloc{{Key: k, Nonce: nonce, Floor: 9}})
	if c, _ := a.Claim(ctx, k); realloc[0].Seq != 10 || c.Seq != 10 || c.Owner.Nonce != nonce {
		t.Fatalf("after reallocating: seq %d, claim %+v; want 10 recorded in the claim", realloc[0].Seq, c)
	}
}

func TestTakeOverOnlyReplacesTheNamedAttempt(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	a, _, _ := newAllocator(t)
	k := key(t, "grp5", 1, "m1")
	if err := a.Seed(ctx, []seq.TopicFloor{{Tenant: k.Tenant, Topic: k.Topic}}); err != nil {
		t.Fatal(err)
	}
	first := a.NewNonce()
	if got, _ := a.MarkDoneAndAllocate(ctx, nil, []seq.Request{{Key: k, Nonce: first}}, nil); got[0].Seq != 1 {
		t.Fatalf("first attempt = %+v", got[0])
	}
	// A take-over naming another attempt finds the claim held and writes nothing.
	second := a.NewNonce()
	got, _ := a.MarkDoneAndAllocate(ctx, nil, []seq.Request{{Key: k, Nonce: second, TakeOver: "someone-else"}}, nil)
	if got[0].Outcome != seq.Held || got[0].Claim.Owner.Nonce != first {
		t.Fatalf("take-over of another attempt = %+v, want held by %s", got[0], first)
	}
	// Naming the holder takes the claim, with a new seq; the old one becomes a hole.
	got, _ = a.MarkDoneAndAllocate(ctx, nil, []seq.Request{{Key: k, Nonce: second, TakeOver: first}}, nil)
	if got[0].Outcome != seq.Allocated || got[0].Seq != 2 {
		t.Fatalf("take-over = %+v, want seq 2", got[0])
	}
	if c, _ := a.Claim(ctx, k); c.Owner.Nonce != second || c.Seq != 2 {
		t.Fatalf("claim after the take-over = %+v", c)
	}
	// The deposed attempt can no longer mark the claim failed; the holder can.
	if err := a.MarkFailed(ctx, []seq.Request{{Key: k, Nonce: first}}); err != nil {
		t.Fatal(err)
	}
	if c, _ := a.Claim(ctx, k); c.State != seq.StatePending || c.Owner.Nonce != second {
		t.Fatalf("a deposed attempt marked the claim failed: %+v", c)
	}
	if err := a.MarkFailed(ctx, []seq.Request{{Key: k, Nonce: second}}); err != nil {
		t.Fatal(err)
	}
	if c, _ := a.Claim(ctx, k); c.State != seq.StateFailed {
		t.Fatalf("the holder's failure left the claim %+v", c)
	}
	// A done claim is never taken over.
	if err := a.MarkDone(ctx, []seq.Done{{Key: k, Seq: 2, MessageID: "m"}}); err != nil {
		t.Fatal(err)
	}
	got, _ = a.MarkDoneAndAllocate(ctx, nil, []seq.Request{{Key: k, Nonce: a.NewNonce(), TakeOver: second}}, nil)
	if got[0].Outcome != seq.Held || got[0].Claim.State != seq.StateDone {
		t.Fatalf("take-over of a done claim = %+v, want held done", got[0])
	}
}

func TestHeartbeatSaysWhichProcessIsAlive(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	_, prefix := testenv.Redis(t)
	a := newNode(t, prefix, "node-a", 600*time.Millisecond)
	b := newNode(t, prefix, "node-b", 600*time.Millisecond)
	restarted := newNode(t, prefix, "node-a", 600*time.Millisecond) // a later start of node-a

	k := key(t, "grp1", 1, "m")
	if err := a.Seed(ctx, []seq.TopicFloor{{Tenant: k.Tenant, Topic: k.Topic}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.MarkDoneAndAllocate(ctx, nil, []seq.Request{{Key: k, Nonce: a.NewNonce()}}, nil); err != nil {
		t.Fatal(err)
	}
	owner := mustClaim(t, b, k).Owner
	if owner.Node != "node-a" || b.Mine(owner) || !a.Mine(owner) {
		t.Fatalf("owner = %+v", owner)
	}
	if alive, err := b.Alive(ctx, owner); err != nil || alive {
		t.Fatalf("Alive before any heartbeat = %v, %v; want dead", alive, err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.RunHeartbeat(runCtx, slog.New(slog.DiscardHandler))
	}()
	waitUntil(t, "node-a to beat", func() bool { alive, _ := b.Alive(ctx, owner); return alive })
	// Beats keep it alive past the TTL.
	time.Sleep(900 * time.Millisecond)
	if alive, _ := b.Alive(ctx, owner); !alive {
		t.Fatal("node-a's heartbeat lapsed while it ran")
	}
	stop()
	<-done
	if alive, _ := b.Alive(ctx, owner); alive {
		t.Fatal("node-a is alive after it retired")
	}
	// Another start of node-a beats: the first start's attempts are still dead.
	if err := restarted.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if alive, _ := b.Alive(ctx, owner); alive {
		t.Fatal("the first start of node-a counts as alive while a later start beats")
	}
	// Retire leaves a heartbeat of another start alone; without beats the key expires.
	if err := a.Retire(ctx); err != nil {
		t.Fatal(err)
	}
	if n := restarted.Beat(ctx); n != nil {
		t.Fatal(n)
	}
	rdb, _ := testenv.Redis(t)
	if ttl := rdb.PTTL(ctx, b.HeartbeatKey("node-a")).Val(); ttl <= 0 || ttl > 600*time.Millisecond {
		t.Fatalf("heartbeat TTL = %v, want (0, 600ms]", ttl)
	}
}

func mustClaim(t *testing.T, a *seq.Allocator, k seq.Key) seq.Claim {
	t.Helper()
	c, err := a.Claim(testenv.Context(t), k)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
