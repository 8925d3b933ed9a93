package hot_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
)

var tenant = domain.MustTenantID("acme")

func newStore(t testing.TB, cfg hot.Config, sizer hot.GroupSizer) (context.Context, *hot.Store, *redis.Client, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	rdb, prefix := testenv.Redis(t)
	cfg.Prefix = prefix
	s, err := hot.NewStore(rdb, cfg, sizer)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, s, rdb, prefix
}

func apply(ctx context.Context, t *testing.T, s *hot.Store, tn domain.TenantID, events ...domain.Envelope) {
	t.Helper()
	for _, e := range events {
		if err := s.Apply(ctx, tn, e); err != nil {
			t.Fatalf("apply %s: %v", e.EventType, err)
		}
	}
}

func content(t *testing.T, m readmodels.Message) string {
	t.Helper()
	if m.Content == nil {
		return "<nil>"
	}
	var s string
	if err := json.Unmarshal(m.Content, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func one(ctx context.Context, t *testing.T, s *hot.Store, topic string, seq int64) readmodels.Message {
	t.Helper()
	msgs, complete, err := s.Range(ctx, tenant, rmtest.Topic(t, topic), seq, seq)
	if err != nil || !complete || len(msgs) != 1 {
		t.Fatalf("range %s %d: %d messages, complete=%v, err=%v", topic, seq, len(msgs), complete, err)
	}
	return msgs[0]
}

func TestSentThenRangeAndLastSeq(t *testing.T) {
	t.Parallel()
	ctx, s, _, _ := newStore(t, hot.Config{}, nil)
	for seq := int64(1); seq <= 3; seq++ {
		apply(ctx, t, s, tenant, rmtest.Sent(t, tenant, "grp7", seq, 10, "m"))
	}
	msgs, complete, err := s.Range(ctx, tenant, rmtest.Topic(t, "grp7"), 1, 3)
	if err != nil || !complete || len(msgs) != 3 {
		t.Fatalf("range: %d, %v, %v", len(msgs), complete, err)
	}
	m := msgs[1]
	if m.Seq != 2 || m.From != 10 || m.Version != 1 || m.Status != readmodels.StatusNormal || content(t, m) != "m" || m.SentAt.IsZero() {
		t.Fatalf("snapshot %+v", m)
	}
	if last, found, err := s.LastSeq(ctx, tenant, rmtest.Topic(t, "grp7")); err != nil || !found || last != 3 {
		t.Fatalf("last seq %d %v %v", last, found, err)
	}
	// A redelivered older sent event does not lower the last seq.
	apply(ctx, t, s, tenant, rmtest.Sent(t, tenant, "grp7", 1, 10, "m"))
	if last, _, _ := s.LastSeq(ctx, tenant, rmtest.Topic(t, "grp7")); last != 3 {
		t.Fatalf("last seq after redelivery %d", last)
	}
}

func TestRecallIsFinal(t *testing.T) {
	t.Parallel()
	ctx, s, rdb, prefix := newStore(t, hot.Config{}, nil)
	sent := rmtest.Sent(t, tenant, "grp7", 1, 10, "secret")
	apply(ctx, t, s, tenant, sent, rmtest.Recalled(t, tenant, "grp7", 1, 10))
	apply(ctx, t, s, tenant, rmtest.Edited(t, tenant, "grp7", 1, 10, 2, "edited after recall"))
	apply(ctx, t, s, tenant, sent) // redelivered
	m := one(ctx, t, s, "grp7", 1)
	if m.Status != readmodels.StatusRecalled || m.Content != nil || m.RecalledBy != 10 || m.RecalledAt == nil || m.Version != 2 {
		t.Fatalf("after recall: %+v", m)
	}
	raw, err := rdb.HGetAll(ctx, prefix+"acme:topic:{grp7}:hot_msg:1").Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, has := raw["c"]; has {
		t.Fatalf("recalled snapshot still stores content: %v", raw)
	}
}

func TestRecallBeforeSentLeavesATombstone(t *testing.T) {
	t.Parallel()
	ctx, s, _, _ := newStore(t, hot.Config{}, nil)
	apply(ctx, t, s, tenant, rmtest.Recalled(t, tenant, "grp7", 4, 10))
	if _, complete, _ := s.Range(ctx, tenant, rmtest.Topic(t, "grp7"), 4, 4); complete {
		t.Fatal("a tombstone alone counts as a complete snapshot")
	}
	apply(ctx, t, s, tenant, rmtest.Sent(t, tenant, "grp7", 4, 10, "secret"))
	m := one(ctx, t, s, "grp7", 4)
	if m.Status != readmodels.StatusRecalled || m.Content != nil {
		t.Fatalf("sent after its recall cached the content: %+v", m)
	}
}

func TestEditsOnlyMoveForward(t *testing.T) {
	t.Parallel()
	ctx, s, _, _ := newStore(t, hot.Config{}, nil)
	sent := rmtest.Sent(t, tenant, "grp7", 1, 10, "v1")
	apply(ctx, t, s, tenant, sent,
		rmtest.Edited(t, tenant, "grp7", 1, 10, 3, "v3"),
		rmtest.Edited(t, tenant, "grp7", 1, 10, 2, "v2 late"),
		sent)
	if m := one(ctx, t, s, "grp7", 1); content(t, m) != "v3" || m.Version != 3 {
		t.Fatalf("after v1, v3, v2, v1: %q version %d", content(t, m), m.Version)
	}
	// An edit that arrives before its sent event (the snapshot was evicted) is kept too.
	apply(ctx, t, s, tenant, rmtest.Edited(t, tenant, "grp7", 2, 10, 2, "v2 first"), rmtest.Sent(t, tenant, "grp7", 2, 10, "v1"))
	if m := one(ctx, t, s, "grp7", 2); content(t, m) != "v2 first" || m.Version != 2 || m.From != 10 {
		t.Fatalf("edit then sent: %+v", m)
	}
}

func TestSeqHoleMakesRangeIncomplete(t *testing.T) {
	t.Parallel()
	ctx, s, _, _ := newStore(t, hot.Config{}, nil)
	for seq := int64(1); seq <= 10; seq++ {
		if seq != 5 {
			apply(ctx, t, s, tenant, rmtest.Sent(t, tenant, "grp7", seq, 10, "m"))
		}
	}
	tp := rmtest.Topic(t, "grp7")
	if _, complete, _ := s.Range(ctx, tenant, tp, 1, 10); complete {
		t.Fatal("range over a hole reported complete")
	}
	if msgs, complete, _ := s.Range(ctx, tenant, tp, 6, 10); !complete || len(msgs) != 5 {
		t.Fatalf("range after the hole: %d, %v", len(msgs), complete)
	}
	w, err := s.Window(ctx, tenant, tp, 1, 1<<62, 4, true)
	if err != nil || !w.Complete || !w.HasLast || w.LastSeq != 10 || len(w.Messages) != 4 || w.Messages[0].Seq != 7 {
		t.Fatalf("newest window: %+v, %v", w, err)
	}
}

type sizes map[int64]int

func (s sizes) GroupSize(_ context.Context, _ domain.TenantID, id int64) (int, error) {
	return s[id], nil
}

func TestOnlyLargeGroupsAreCached(t *testing.T) {
	t.Parallel()
	ctx, s, _, _ := newStore(t, hot.Config{MinGroupSize: 100}, sizes{7: 500, 8: 3})
	apply(ctx, t, s, tenant,
		rmtest.Sent(t, tenant, "grp7", 1, 10, "big"),
		rmtest.Sent(t, tenant, "grp8", 1, 10, "small"),
		rmtest.Sent(t, tenant, "p2p10_20", 1, 10, "direct"))
	if _, complete, _ := s.Range(ctx, tenant, rmtest.Topic(t, "grp7"), 1, 1); !complete {
		t.Fatal("large group not cached")
	}
	for _, topic := range []string{"grp8", "p2p10_20"} {
		if msgs, _, _ := s.Range(ctx, tenant, rmtest.Topic(t, topic), 1, 1); len(msgs) != 0 {
			t.Fatalf("%s cached", topic)
		}
		if last, found, _ := s.LastSeq(ctx, tenant, rmtest.Topic(t, topic)); !found || last != 1 {
			t.Fatalf("%s: last seq not kept for an uncached topic", topic)
		}
	}
}

func TestOldMessagesAreNotCachedAndSnapshotsExpire(t *testing.T) {
	t.Parallel()
	ctx, s, rdb, prefix := newStore(t, hot.Config{TTL: time.Hour}, nil)
	old := rmtest.Sent(t, tenant, "grp7", 1, 10, "old")
	var p domain.MessageSent
	_ = old.Decode(&p)
	p.SentAt = time.Now().Add(-2 * time.Hour)
	old.Payload, _ = json.Marshal(p)
	apply(ctx, t, s, tenant, old, rmtest.Sent(t, tenant, "grp7", 2, 10, "new"))
	if msgs, _, _ := s.Range(ctx, tenant, rmtest.Topic(t, "grp7"), 1, 1); len(msgs) != 0 {
		t.Fatal("a message older than TTL was cached")
	}
	ttl, err := rdb.PTTL(ctx, prefix+"acme:topic:{grp7}:hot_msg:2").Result()
	if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("snapshot ttl %v (%v), want about 1h", ttl, err)
	}
}

func TestMaxPerTopicDropsTheOldest(t *testing.T) {
	t.Parallel()
	ctx, s, rdb, prefix := newStore(t, hot.Config{MaxPerTopic: 3}, nil)
	for seq := int64(1); seq <= 5; seq++ {
		apply(ctx, t, s, tenant, rmtest.Sent(t, tenant, "grp7", seq, 10, "m"))
	}
	seqs, err := rdb.ZRange(ctx, prefix+"acme:topic:{grp7}:hot_msg_seqs", 0, -1).Result()
	if err != nil || len(seqs) != 3 || seqs[0] != "3" {
		t.Fatalf("indexed seqs %v (%v), want [3 4 5]", seqs, err)
	}
}

func TestReadSeqsOnlyMoveForward(t *testing.T) {
	t.Parallel()
	ctx, s, _, _ := newStore(t, hot.Config{}, nil)
	apply(ctx, t, s, tenant,
		rmtest.Sent(t, tenant, "p2p10_20", 1, 10, "a"),
		rmtest.Sent(t, tenant, "p2p10_20", 2, 10, "b"),
		rmtest.ReadMarked(t, tenant, "grp7", 20, 9, 9),
		rmtest.ReadMarked(t, tenant, "grp7", 20, 4, 4))
	tp := rmtest.Topic(t, "p2p10_20")
	if n, found, _ := s.ReadSeq(ctx, tenant, 10, tp); !found || n != 2 {
		t.Fatalf("sender read seq %d %v, want 2", n, found)
	}
	if n, found, _ := s.ReadSeq(ctx, tenant, 20, tp); !found || n != 0 {
		t.Fatalf("receiver read seq %d %v, want a 0 field", n, found)
	}
	all, err := s.ReadSeqs(ctx, tenant, 20)
	if err != nil || len(all) != 2 || all["grp7"] != 9 || all["p2p10_20"] != 0 {
		t.Fatalf("read seqs of 20: %v %v", all, err)
	}
}

func TestTenantsDoNotShareKeys(t *testing.T) {
	t.Parallel()
	ctx, s, _, _ := newStore(t, hot.Config{}, nil)
	other := domain.MustTenantID("other")
	apply(ctx, t, s, tenant, rmtest.Sent(t, tenant, "grp7", 1, 10, "acme"))
	apply(ctx, t, s, other, rmtest.Sent(t, other, "grp7", 1, 10, "other"), rmtest.Sent(t, other, "grp7", 2, 10, "other"))
	if m := one(ctx, t, s, "grp7", 1); content(t, m) != "acme" {
		t.Fatalf("tenant acme reads %q", content(t, m))
	}
	if last, _, _ := s.LastSeq(ctx, tenant, rmtest.Topic(t, "grp7")); last != 1 {
		t.Fatalf("acme last seq %d", last)
	}
	if n, _, _ := s.ReadSeq(ctx, tenant, 10, rmtest.Topic(t, "grp7")); n != 1 {
		t.Fatalf("acme read seq %d", n)
	}
}

func TestRedisDownIsRetryable(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	s, err := hot.NewStore(rdb, hot.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Apply(ctx, tenant, rmtest.Sent(t, tenant, "grp7", 1, 10, "m")); !errors.Is(err, domain.ErrRetryable) {
		t.Fatalf("apply with Redis down: %v", err)
	}
	if _, _, err := s.LastSeq(ctx, tenant, rmtest.Topic(t, "grp7")); !errors.Is(err, domain.ErrRetryable) {
		t.Fatalf("last seq with Redis down: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, cfg := range []hot.Config{{Prefix: "im:{x}:"}, {TTL: time.Millisecond}, {MinGroupSize: -1}, {MaxPerTopic: -1}} {
		if _, err := hot.NewStore(redis.NewClient(&redis.Options{}), cfg, nil); err == nil {
			t.Errorf("accepted %+v", cfg)
		}
	}
}

func TestApplyBatchMatchesOneByOne(t *testing.T) {
	t.Parallel()
	ctx, s, _, _ := newStore(t, hot.Config{}, nil)
	var events []domain.Envelope
	for seq := int64(1); seq <= 5; seq++ {
		events = append(events, rmtest.Sent(t, tenant, "grp7", seq, 10, "v1"))
	}
	events = append(events,
		rmtest.Recalled(t, tenant, "grp7", 3, 10),
		rmtest.Edited(t, tenant, "grp7", 2, 10, 3, "v3"),
		rmtest.Edited(t, tenant, "grp7", 2, 10, 2, "v2"),
		rmtest.Sent(t, tenant, "grp7", 2, 10, "v1"),
		rmtest.ReadMarked(t, tenant, "grp7", 20, 4, 4),
		rmtest.Sent(t, tenant, "p2p10_20", 1, 10, "d"))
	bad := rmtest.Sent(t, tenant, "grp7", 6, 10, "x")
	bad.Payload = []byte(`{"topic": 7}`)
	n, err := s.ApplyBatch(ctx, tenant, append(events, bad, rmtest.Sent(t, tenant, "grp7", 7, 10, "after")))
	if n != len(events) || !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("batch with a bad event: applied %d, %v", n, err)
	}
	if _, err := s.ApplyBatch(ctx, tenant, events); err != nil { // redelivered
		t.Fatal(err)
	}
	msgs, complete, err := s.Range(ctx, tenant, rmtest.Topic(t, "grp7"), 1, 5)
	if err != nil || !complete || len(msgs) != 5 {
		t.Fatalf("range: %d %v %v", len(msgs), complete, err)
	}
	if content(t, msgs[1]) != "v3" || msgs[1].Version != 3 || msgs[2].Content != nil || msgs[2].Status != readmodels.StatusRecalled {
		t.Fatalf("batch result: seq 2 %+v, seq 3 %+v", msgs[1], msgs[2])
	}
	if last, _, _ := s.LastSeq(ctx, tenant, rmtest.Topic(t, "grp7")); last != 5 {
		t.Fatalf("last seq %d: the event after the bad one was applied", last)
	}
	if n, _, _ := s.ReadSeq(ctx, tenant, 20, rmtest.Topic(t, "grp7")); n != 4 {
		t.Fatalf("read seq %d", n)
	}
	if n, found, _ := s.ReadSeq(ctx, tenant, 20, rmtest.Topic(t, "p2p10_20")); !found || n != 0 {
		t.Fatalf("1:1 receiver field %d %v", n, found)
	}
}
