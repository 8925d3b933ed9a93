package replay_test

import (
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/msgstore"
	"github.com/imledger/imledger/replay"
)

// Seq-skip markers survive a rebuild of both read models: verify compares them like messages,
// history still leaves them out, and the rebuilt watermarks step over them.
func TestRebuildAndVerifyWithMarkers(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	tn := m.Tenant("markers")
	store := projtest.NewEventStore(t, h.Pool)
	grp := projtest.GroupTopic(1)
	p2p, err := domain.ParseTopic("p2p1_2")
	if err != nil {
		t.Fatal(err)
	}
	skip := func(topic domain.Topic, seq int64) domain.Envelope {
		e, err := domain.NewSeqSkipped(tn, topic, seq, domain.SkipGapTimeout, domain.Actor{Type: domain.ActorSystem, ID: "relay"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	history := projtest.AppendAll(t, store, []domain.Envelope{
		projtest.SentEvent(tn, grp, 1, 1, "a"), projtest.SentEvent(tn, grp, 2, 1, "b"), skip(grp, 3), projtest.SentEvent(tn, grp, 4, 2, "d"),
		projtest.SentEvent(tn, grp, 5, 2, "e"), projtest.SentEvent(tn, p2p, 1, 1, "x"), skip(p2p, 2), projtest.SentEvent(tn, p2p, 3, 2, "z"),
	})
	if _, err := m.Store.Apply(projtest.Ctx(t), tn, projections.GroupMessagesMySQL, msgstore.DefaultTables(), history); err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testenv.Redis(t)
	hs, err := hot.NewStore(rdb, hot.Config{Prefix: prefix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := replay.NewMessageRebuilder(m.Store, store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	hotRb, err := replay.NewHotRebuilder(hs, store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	if res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn}); err != nil || !res.OK() || res.Events != 8 {
		t.Fatalf("verify of a read model with markers: %+v, %v", res, err)
	}
	if _, err := rb.Rebuild(projtest.Ctx(t), replay.RebuildOptions{Projection: projections.ProjectionMessagesMySQL, Tenant: tn}); err != nil {
		t.Fatal(err)
	}
	w, err := m.Store.Watermarks(projtest.Ctx(t), tn, msgstore.DefaultTables(), []domain.Topic{grp, p2p})
	if err != nil || w[grp.String()] != 5 || w[p2p.String()] != 3 {
		t.Fatalf("watermarks after the rebuild: %v, %v; want grp1 5, p2p1_2 3", w, err)
	}
	if got := len(m.Page(tn, grp)); got != 4 {
		t.Fatalf("history after the rebuild has %d messages, want 4 (no marker)", got)
	}
	if res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn}); err != nil || !res.OK() {
		t.Fatalf("verify after the rebuild: %+v, %v", res, err)
	}
	if _, err := hotRb.Rebuild(projtest.Ctx(t), replay.RebuildOptions{Projection: projections.ProjectionMessagesHot, Tenant: tn}); err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[domain.Topic]int64{grp: 5, p2p: 3} {
		if got, found, err := hs.Watermark(projtest.Ctx(t), tn, topic); err != nil || !found || got != want {
			t.Errorf("hot watermark of %s after the rebuild = %d (found %v), %v; want %d", topic, got, found, err, want)
		}
	}
	if res, err := hotRb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn}); err != nil || !res.OK() {
		t.Fatalf("hot verify of a read model with markers: %+v, %v", res, err)
	}
	// A watermark altered by hand is found.
	if err := rdb.HSet(projtest.Ctx(t), prefix+tn.String()+":topic:{"+grp.String()+"}:proj_wm", "w", 9).Err(); err != nil {
		t.Fatal(err)
	}
	if res, err := hotRb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn}); err != nil || res.OK() {
		t.Fatalf("hot verify of a wrong watermark: %+v, %v", res, err)
	}
}
