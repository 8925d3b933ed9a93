package projections_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/hot"
)

func readMark(tenant domain.TenantID, topic domain.Topic, user domain.UserID, seq, version int64) domain.Envelope {
	return mustEnvelope(tenant, domain.ReadMarksStreamID(topic, user), version, domain.MessageEventType(topic.Kind(), domain.ActionReadMarked),
		domain.ReadMarked{Topic: topic.String(), User: user, ReadSeq: seq, RecvSeq: seq, At: time.Now().UTC()})
}

// replay --verify --projection messages-hot: the hot read model the live projector built from
// Kafka matches the log, and a hot-message key altered by hand makes the check fail naming its
// topic.
func TestVerifyHotFindsKeysAlteredByHand(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	m := newMySQL(t)
	rdb, prefix := testenv.Redis(t)
	hs, err := hot.NewStore(rdb, hot.Config{Prefix: prefix, MaxPerTopic: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tn := m.tenant("hotverify")
	store := newEventStore(t, h.pool)
	g1, g2 := groupTopic(31), groupTopic(32)
	d, _ := domain.DirectTopic(5, 6)
	old := sentEvent(tn, g2, 1, 7, "a day old")
	var p domain.MessageSent
	_ = old.Decode(&p)
	p.SentAt = time.Now().Add(-25 * time.Hour).UTC()
	old = mustEnvelope(tn, g2.String(), 1, domain.EventGroupMessageSent, p)
	history := []domain.Envelope{old}
	for seq := int64(1); seq <= 6; seq++ {
		history = append(history, sentEvent(tn, g1, seq, domain.UserID(5+seq%2), fmt.Sprintf("hello %d", seq)))
	}
	history = append(history,
		sentEvent(tn, g2, 2, 7, "today"), sentEvent(tn, g2, 3, 8, "later"),
		recallEvent(tn, g1, 5, 6, 1), editEvent(tn, g1, 6, 5, 2, "edited"), recallEvent(tn, g2, 1, 7, 1),
		sentEvent(tn, d, 1, 5, "psst"), sentEvent(tn, d, 2, 6, "yes"),
		readMark(tn, g1, 9, 4, 1), readMark(tn, d, 5, 2, 1))
	history = appendAll(t, store, history)
	h.run(h.config(), projections.MessagesHot(hs, ""))
	h.publish(history...)
	eventually(t, 30*time.Second, func() error {
		seqs, err := hs.LastSeqs(testCtx(t), tn, []domain.Topic{g1, g2, d})
		if err != nil || seqs[g1.String()] != 6 || seqs[g2.String()] != 3 || seqs[d.String()] != 2 {
			return fmt.Errorf("last seqs %v, %v", seqs, err)
		}
		if s, _, _ := hs.ReadSeq(testCtx(t), tn, 9, g1); s != 4 {
			return fmt.Errorf("read seq of 9 is %d", s)
		}
		w, err := hs.Window(testCtx(t), tn, g1, 5, 6, 2, false)
		if err != nil || len(w.Messages) != 2 || !w.Messages[0].Recalled() || w.Messages[1].Version != 2 {
			return fmt.Errorf("recall and edit not applied yet: %+v %v", w.Messages, err)
		}
		return nil
	})
	rb, err := projections.NewRebuilder(projections.RebuildDeps{Events: store, Tenants: m.router, Messages: m.store, Hot: hs, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	verify := func() (projections.HotVerifyResult, string) {
		t.Helper()
		var out bytes.Buffer
		res, err := rb.VerifyHot(testCtx(t), projections.VerifyOptions{Tenant: tn, Out: &out})
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
	ctx := testCtx(t)
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
	if _, err := rb.Rebuild(ctx, projections.RebuildOptions{Projection: projections.ProjectionMessagesHot, Tenant: tn}); err != nil {
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
	keys, err := rdb.Keys(testCtx(t), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}
