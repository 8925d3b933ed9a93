package seq_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

func newAllocator(t *testing.T) (*seq.Allocator, *redis.Client, string) {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	a, err := seq.New(rdb, seq.Config{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return a, rdb, prefix
}

func key(t *testing.T, topic string, from domain.UserID, cmid string) seq.Key {
	t.Helper()
	tp, err := domain.ParseTopic(topic)
	if err != nil {
		t.Fatal(err)
	}
	c, err := domain.NewClientMsgID(cmid)
	if err != nil {
		t.Fatal(err)
	}
	return seq.Key{Tenant: domain.MustTenantID("acme"), Topic: tp, From: from, ClientMsgID: c}
}

func TestKeysShareTheTopicSlot(t *testing.T) {
	t.Parallel()
	a, _, prefix := newAllocator(t)
	k := key(t, "grp7", 42, "c-1")
	if got, want := a.ClaimKey(k), prefix+"acme:topic:{grp7}:uniq:msg:42:c-1"; got != want {
		t.Errorf("ClaimKey = %q, want %q", got, want)
	}
	if got, want := a.CounterKey(k.Tenant, k.Topic), prefix+"acme:topic:{grp7}:last_seq"; got != want {
		t.Errorf("CounterKey = %q, want %q", got, want)
	}
}

func TestAllocateNeverInventsASeq(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb, _ := newAllocator(t)
	k := key(t, "grp1", 1, "m1")

	got := a.Allocate(ctx, []seq.Key{k})
	if got[0].Err != nil || got[0].Outcome != seq.NeedsSeed {
		t.Fatalf("allocate on a missing counter = %+v, want NeedsSeed", got[0])
	}
	if n := rdb.Exists(ctx, a.ClaimKey(k), a.CounterKey(k.Tenant, k.Topic)).Val(); n != 0 {
		t.Fatalf("NeedsSeed wrote %d keys, want none", n)
	}

	if err := a.Seed(ctx, []seq.TopicFloor{{Tenant: k.Tenant, Topic: k.Topic, Floor: 41}}); err != nil {
		t.Fatal(err)
	}
	got = a.Allocate(ctx, []seq.Key{k})
	if got[0].Outcome != seq.Allocated || got[0].Seq != 42 {
		t.Fatalf("allocate after seeding 41 = %+v, want seq 42", got[0])
	}
	c, err := a.Claim(ctx, k)
	if err != nil || c.State != seq.StatePending {
		t.Fatalf("claim after allocate = %+v, %v; want pending", c, err)
	}
	if ttl := rdb.PTTL(ctx, a.ClaimKey(k)).Val(); ttl <= 0 || ttl > 60*time.Second {
		t.Errorf("pending TTL = %v, want (0, 60s]", ttl)
	}
}

func TestClaimLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb, _ := newAllocator(t)
	k1, k2 := key(t, "p2p1_2", 1, "a"), key(t, "p2p1_2", 2, "a")
	if err := a.Seed(ctx, []seq.TopicFloor{{Tenant: k1.Tenant, Topic: k1.Topic}}); err != nil {
		t.Fatal(err)
	}

	// One batch: the repeated key is held by its first occurrence.
	got := a.Allocate(ctx, []seq.Key{k1, k2, k1})
	if got[0].Seq != 1 || got[1].Seq != 2 {
		t.Fatalf("seqs = %d, %d; want 1, 2", got[0].Seq, got[1].Seq)
	}
	if got[2].Outcome != seq.Held || got[2].Claim.State != seq.StatePending {
		t.Fatalf("repeated key = %+v, want held pending", got[2])
	}

	sent := time.Date(2026, 8, 25, 4, 0, 0, 0, time.UTC)
	if err := a.MarkDone(ctx, []seq.Done{{Key: k1, Seq: 1, MessageID: "m-one", SentAt: sent}}); err != nil {
		t.Fatal(err)
	}
	got = a.Allocate(ctx, []seq.Key{k1})
	if c := got[0].Claim; got[0].Outcome != seq.Held || c.State != seq.StateDone || c.Seq != 1 ||
		c.MessageID != "m-one" || !c.SentAt.Equal(sent) {
		t.Fatalf("allocate of a done send = %+v, want held done seq 1 m-one", got[0])
	}
	if ttl := rdb.PTTL(ctx, a.ClaimKey(k1)).Val(); ttl < 23*time.Hour {
		t.Errorf("done TTL = %v, want about 24h", ttl)
	}

	// Marking done and allocating share a round trip; the marks go first.
	k3 := key(t, "p2p1_2", 1, "b")
	got = a.Allocate(ctx, []seq.Key{k3})
	if got[0].Seq != 3 {
		t.Fatalf("allocate k3 = %+v, want seq 3", got[0])
	}
	got, err := a.MarkDoneAndAllocate(ctx, []seq.Done{{Key: k3, Seq: 3, MessageID: "m-three", SentAt: sent}}, []seq.Request{{Key: k3}, {Key: key(t, "p2p1_2", 1, "c")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Outcome != seq.Held || got[0].Claim.State != seq.StateDone || got[0].Claim.Seq != 3 || got[1].Seq != 4 {
		t.Fatalf("MarkDoneAndAllocate = %+v, want k3 held done at 3 and a new seq 4", got)
	}

	// A failed claim may be taken again and gets a new seq; done is never marked failed.
	if err := a.MarkFailed(ctx, []seq.Request{{Key: k1}, {Key: k2}}); err != nil {
		t.Fatal(err)
	}
	if c, _ := a.Claim(ctx, k1); c.State != seq.StateDone {
		t.Errorf("MarkFailed overwrote a done claim: %+v", c)
	}
	if c, _ := a.Claim(ctx, k2); c.State != seq.StateFailed {
		t.Errorf("claim after MarkFailed = %+v, want failed", c)
	}
	if ttl := rdb.PTTL(ctx, a.ClaimKey(k2)).Val(); ttl <= 0 || ttl > 5*time.Minute {
		t.Errorf("failed TTL = %v, want (0, 5m]", ttl)
	}
	got = a.Allocate(ctx, []seq.Key{k2})
	if got[0].Outcome != seq.Allocated || got[0].Seq != 5 {
		t.Fatalf("allocate of a failed send = %+v, want seq 5", got[0])
	}

	if c, err := a.Claim(ctx, key(t, "p2p1_2", 1, "never")); err != nil || c.State != seq.StateAbsent {
		t.Errorf("claim of an unknown send = %+v, %v; want absent", c, err)
	}
}

func TestSeedAndReallocateNeverGoBackwards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _, _ := newAllocator(t)
	k := key(t, "grp9", 5, "x")
	tf := func(floor int64) []seq.TopicFloor {
		return []seq.TopicFloor{{Tenant: k.Tenant, Topic: k.Topic, Floor: floor}}
	}
	if err := a.Seed(ctx, tf(10)); err != nil {
		t.Fatal(err)
	}
	if err := a.Seed(ctx, tf(3)); err != nil {
		t.Fatal(err)
	}
	if n, ok, _ := a.LastSeq(ctx, k.Tenant, k.Topic); !ok || n != 10 {
		t.Fatalf("counter after seeding 10 then 3 = %d (exists %v), want 10", n, ok)
	}
	got := a.Reallocate(ctx, []seq.Realloc{{Key: k, Floor: 20}, {Key: k, Floor: 20}, {Key: k, Floor: 2}})
	for i, want := range []int64{21, 22, 23} {
		if got[i].Err != nil || got[i].Seq != want {
			t.Errorf("reallocate %d = %+v, want seq %d", i, got[i], want)
		}
	}
	if c, _ := a.Claim(ctx, k); c.State != seq.StatePending {
		t.Errorf("claim after reallocate = %+v, want pending", c)
	}
}

func TestConcurrentAllocationsAreDistinct(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _, _ := newAllocator(t)
	tp := key(t, "grp3", 1, "x")
	if err := a.Seed(ctx, []seq.TopicFloor{{Tenant: tp.Tenant, Topic: tp.Topic}}); err != nil {
		t.Fatal(err)
	}
	const workers, per = 10, 20
	var mu sync.Mutex
	var seqs []int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys := make([]seq.Key, per)
			for i := range keys {
				keys[i] = key(t, "grp3", domain.UserID(w+1), fmt.Sprintf("c%d", i))
			}
			for _, al := range a.Allocate(ctx, keys) {
				if al.Outcome != seq.Allocated {
					t.Errorf("allocation = %+v", al)
					continue
				}
				mu.Lock()
				seqs = append(seqs, al.Seq)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("seqs[%d] = %d; want exactly 1..%d", i, s, workers*per)
		}
	}
	if len(seqs) != workers*per {
		t.Fatalf("got %d seqs, want %d", len(seqs), workers*per)
	}
}

func TestUnreachableRedisIsRetryable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	a, err := seq.New(rdb, seq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	k := key(t, "grp1", 1, "m")
	if got := a.Allocate(ctx, []seq.Key{k}); !errors.Is(got[0].Err, domain.ErrRetryable) {
		t.Errorf("Allocate error = %v, want ErrRetryable", got[0].Err)
	}
	checks := map[string]error{
		"Seed":       a.Seed(ctx, []seq.TopicFloor{{Tenant: k.Tenant, Topic: k.Topic}}),
		"MarkDone":   a.MarkDone(ctx, []seq.Done{{Key: k, Seq: 1}}),
		"MarkFailed": a.MarkFailed(ctx, []seq.Request{{Key: k}}),
	}
	_, err = a.Claim(ctx, k)
	checks["Claim"] = err
	for name, err := range checks {
		if !errors.Is(err, domain.ErrRetryable) {
			t.Errorf("%s error = %v, want ErrRetryable", name, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Redis(t)
	for _, cfg := range []seq.Config{
		{KeyPrefix: "im:{x}:"},
		{PendingTTL: -time.Second},
		{DoneTTL: time.Microsecond},
	} {
		if _, err := seq.New(rdb, cfg); err == nil {
			t.Errorf("New(%+v) accepted a bad config", cfg)
		}
	}
}

// TestOneBatchOfSeveralTopics: sends to several topics interleaved in one batch get, per topic,
// the seqs one call per send would give them, in request order; a topic whose counter is missing
// needs seeding without touching the others.
func TestOneBatchOfSeveralTopics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb, _ := newAllocator(t)
	a1, b1, a2, c1 := key(t, "grp1", 1, "a"), key(t, "grp2", 1, "a"), key(t, "grp1", 2, "a"), key(t, "grp3", 1, "a")
	if err := a.Seed(ctx, []seq.TopicFloor{{Tenant: a1.Tenant, Topic: a1.Topic, Floor: 10}, {Tenant: c1.Tenant, Topic: c1.Topic}}); err != nil {
		t.Fatal(err)
	}
	got := a.Allocate(ctx, []seq.Key{a1, b1, a2, c1, a1})
	want := []struct {
		outcome seq.Outcome
		seq     int64
	}{{seq.Allocated, 11}, {seq.NeedsSeed, 0}, {seq.Allocated, 12}, {seq.Allocated, 1}, {seq.Held, 0}}
	for i, w := range want {
		if got[i].Err != nil || got[i].Outcome != w.outcome || (w.outcome == seq.Allocated && got[i].Seq != w.seq) {
			t.Errorf("send %d: %+v, want outcome %v seq %d", i, got[i], w.outcome, w.seq)
		}
	}
	if got[4].Claim.Seq != 11 {
		t.Errorf("the repeated send's held claim: %+v, want seq 11", got[4].Claim)
	}
	if n := rdb.Exists(ctx, a.ClaimKey(b1), a.CounterKey(b1.Tenant, b1.Topic)).Val(); n != 0 {
		t.Errorf("the topic without a counter got %d keys, want none", n)
	}
}
