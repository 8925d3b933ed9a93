package replay_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/replay"
)

// replay --verify --projection messages-hot: the hot read model the live projector built from
// Kafka matches the log, and a hot-message key altered by hand makes the check fail naming its
// topic.
func TestVerifyHotFindsKeysAlteredByHand(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	rdb, prefix := testenv.Redis(t)
	hs, err := hot.NewStore(rdb, hot.Config{Prefix: prefix, MaxPerTopic: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tn := m.Tenant("hotverify")
	store := projtest.NewEventStore(t, h.Pool)
	g1, g2 := projtest.GroupTopic(31), projtest.GroupTopic(32)
	d, _ := domain.DirectTopic(5, 6)
	old := projtest.SentEvent(tn, g2, 1, 7, "a day old")
	var p domain.MessageSent
	_ = old.Decode(&p)
	p.SentAt = time.Now().Add(-25 * time.Hour).UTC()
	old = projtest.MustEnvelope(tn, g2.String(), 1, domain.EventGroupMessageSent, p)
	history := []domain.Envelope{old}
	for seq := int64(1); seq <= 6; seq++ {
		history = append(history, projtest.SentEvent(tn, g1, seq, domain.UserID(5+seq%2), fmt.Sprintf("hello %d", seq)))
	}
	history = append(history,
		projtest.SentEvent(tn, g2, 2, 7, "today"), projtest.SentEvent(tn, g2, 3, 8, "later"),
		projtest.RecallEvent(tn, g1, 5, 6, 1), projtest.EditEvent(tn, g1, 6, 5, 2, "edited"), projtest.RecallEvent(tn, g2, 1, 7, 1),
		projtest.SentEvent(tn, d, 1, 5, "psst"), projtest.SentEvent(tn, d, 2, 6, "yes"),
		projtest.ReadMark(tn, g1, 9, 4, 1), projtest.ReadMark(tn, d, 5, 2, 1))
	history = projtest.AppendAll(t, store, history)
	h.Run(h.Config(), projections.MessagesHot(hs, ""))
	h.Publish(history...)
	projtest.Eventually(t, 30*time.Second, func() error {
		seqs, err := hs.LastSeqs(projtest.Ctx(t), tn, []domain.Topic{g1, g2, d})
		if err != nil || seqs[g1.String()] != 6 || seqs[g2.String()] != 3 || seqs[d.String()] != 2 {
			return fmt.Errorf("last seqs %v, %v", seqs, err)
		}
		if s, _, _ := hs.ReadSeq(projtest.Ctx(t), tn, 9, g1); s != 4 {
			return fmt.Errorf("read seq of 9 is %d", s)
		}
		w, err := hs.Window(projtest.Ctx(t), tn, g1, 5, 6, 2, false)
		if err != nil || len(w.Messages) != 2 || !w.Messages[0].Recalled() || w.Messages[1].Version != 2 {
			return fmt.Errorf("recall and edit not applied yet: %+v %v", w.Messages, err)
		}
		return nil
	})
	rb, err := replay.NewHotRebuilder(hs, store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	verify := func() (replay.HotVerifyResult, string) {
		t.Helper()
		var out bytes.Buffer
		res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn, Out: &out})
		if err != nil {
			t.Fatal(err)
		}
		return res, out.String()
	}
	res, out := verify()
	if !res.OK() || res.Topics != 3 || res.Events != int64(len(history)) {
		t.Fatalf("the live read model differs from the log: %+v\n%s", res, out)
	}
	if n := countKeys(t, rdb, prefix+"verify-*"); n != 0 {
		t.Errorf("%d scratch keys left behind", n)
	}

	// Alter one message's content by hand, and lose another's snapshot.
	ctx := projtest.Ctx(t)
	base := func(topic domain.Topic) string { return prefix + tn.String() + ":topic:{" + topic.String() + "}:" }
	if err := rdb.HSet(ctx, base(g1)+"hot_msg:4", "c", `"forged"`).Err(); err != nil {
		t.Fatal(err)
	}
	res, out = verify()
	if res.OK() || strings.Join(res.DiffTopics(), ",") != g1.String() || !strings.Contains(out, "grp31: seq 4: content differs") {
		t.Fatalf("after a content was altered: %+v\n%s", res.Diffs, out)
	}
	if err := rdb.Del(ctx, base(g2)+"hot_msg:3").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, prefix+tn.String()+":user:{5}:read_marks", d.String(), "1").Err(); err != nil {
		t.Fatal(err)
	}
	res, out = verify()
	if got := strings.Join(res.DiffTopics(), ","); got != "grp31,grp32,"+d.String() ||
		!strings.Contains(out, "grp32: seq 3: missing from the hot window") || !strings.Contains(out, "read mark of user 5: live 1, log 2") {
		t.Fatalf("after a snapshot was lost and a read mark moved back: %v\n%s", res.Diffs, out)
	}
	// A rebuild repairs what the verification found.
	if _, err := rb.Rebuild(ctx, replay.RebuildOptions{Projection: projections.ProjectionMessagesHot, Tenant: tn}); err != nil {
		t.Fatal(err)
	}
	_ = rdb.HSet(ctx, base(g1)+"hot_msg:4", "c", `"hello 4"`).Err() // a rebuild only moves forward: put the content back
	if res, out = verify(); !res.OK() {
		t.Fatalf("after the rebuild: %v\n%s", res.Diffs, out)
	}
}

func countKeys(t *testing.T, rdb interface {
	Keys(ctx context.Context, pattern string) *redis.StringSliceCmd
}, pattern string) int {
	t.Helper()
	keys, err := rdb.Keys(projtest.Ctx(t), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

// The hot verification compares the live keys of topics and users the log never mentions too
// (found by a scan of the tenant's keys): a hot window, a last seq and a read mark that no event
// accounts for are differences, while another store's keys under the same prefix (the
// sequencer's counter) and another tenant's keys are not.
func TestVerifyHotFindsKeysOfTopicsTheLogLacks(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	rdb, prefix := testenv.Redis(t)
	hs, err := hot.NewStore(rdb, hot.Config{Prefix: prefix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tn := m.Tenant("hotextra")
	store := projtest.NewEventStore(t, h.Pool)
	history := projtest.AppendAll(t, store, []domain.Envelope{projtest.SentEvent(tn, projtest.GroupTopic(41), 1, 5, "logged"), projtest.ReadMark(tn, projtest.GroupTopic(41), 6, 1, 1)})
	ctx := projtest.Ctx(t)
	if _, err := hs.ApplyBatch(ctx, tn, history); err != nil {
		t.Fatal(err)
	}
	rb, err := replay.NewHotRebuilder(hs, store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	verify := func() (replay.HotVerifyResult, string) {
		t.Helper()
		var out bytes.Buffer
		res, err := rb.Verify(ctx, replay.VerifyOptions{Tenant: tn, Out: &out})
		if err != nil {
			t.Fatal(err)
		}
		return res, out.String()
	}
	base := prefix + tn.String() + ":"
	// Keys the verification must leave alone: the sequencer's counter of a topic the log lacks
	// (its append failed) and another tenant's hot window.
	for key, val := range map[string]string{base + "topic:{grp98}:last_seq": "4", prefix + "othertenant:topic:{grp97}:proj_last_seq": "2"} {
		if err := rdb.Set(ctx, key, val, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if res, out := verify(); !res.OK() || res.Topics != 1 || res.Users != 2 {
		t.Fatalf("the live read model differs from the log: %+v\n%s", res, out)
	}
	// A topic, and a user's read mark, that no event of the log accounts for.
	pipe := rdb.TxPipeline()
	pipe.ZAdd(ctx, base+"topic:{grp99}:hot_msg_seqs", redis.Z{Score: 1, Member: "1"})
	pipe.HSet(ctx, base+"topic:{grp99}:hot_msg:1", "c", `"not in the log"`)
	pipe.Set(ctx, base+"topic:{grp99}:proj_last_seq", "1", time.Hour)
	pipe.HSet(ctx, base+"user:{77}:read_marks", "grp96", "3")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	res, out := verify()
	if got := strings.Join(res.DiffTopics(), ","); got != "grp96,grp99" {
		t.Errorf("topics that differ: %s, want grp96,grp99\n%s", got, out)
	}
	for _, want := range []string{"grp99: last seq: live 1, log (none)", "grp99: seq 1: in the hot window, but the log does not put it there",
		"grp96: read mark of user 77: live 3, log (none)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "grp98") || strings.Contains(out, "grp97") {
		t.Errorf("the report names another store's or another tenant's keys:\n%s", out)
	}
}

// TestRebuildHotReappliesIntoRedis rebuilds the hot projection from the event store into an
// empty Redis prefix, then again (idempotent).
func TestRebuildHotReappliesIntoRedis(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	hs := projtest.NewHot(t)
	tn := m.Tenant("hotrb")
	store := projtest.NewEventStore(t, h.Pool)
	g := projtest.GroupTopic(11)
	projtest.AppendAll(t, store, []domain.Envelope{
		projtest.SentEvent(tn, g, 1, 5, "one"), projtest.SentEvent(tn, g, 2, 6, "two"), projtest.RecallEvent(tn, g, 1, 5, 1),
	})
	rb, err := replay.NewHotRebuilder(hs, store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		progress := &countingProgress{}
		res, err := rb.Rebuild(projtest.Ctx(t), replay.RebuildOptions{Projection: projections.ProjectionMessagesHot, Tenant: tn, Progress: progress.start})
		if err != nil || res.Events != 3 {
			t.Fatalf("rebuild hot: %+v, %v", res, err)
		}
		if progress.total != 3 || progress.added != 3 || progress.finished != 1 {
			t.Errorf("progress: %+v, want a total of 3, 3 added, finished once", *progress)
		}
		red := projtest.HotRange(t, hs, tn, g, 2)
		if len(red) != 2 || !red[0].Recalled() || string(red[1].Content) != `"two"` {
			t.Fatalf("redis after rebuild %d: %+v", i+1, red)
		}
	}
}

// countingProgress records what a rebuild reports through replay.Progress.
type countingProgress struct {
	total, added, finished int64
}

func (p *countingProgress) start(_ string, total int64) replay.ProgressTracker {
	p.total = total
	return p
}

func (p *countingProgress) Add(n int) error { p.added += int64(n); return nil }
func (p *countingProgress) Finish() error   { p.finished++; return nil }
