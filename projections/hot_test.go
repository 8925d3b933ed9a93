package projections_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/replay"
)

func newHot(t testing.TB) *hot.Store {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	s, err := hot.NewStore(rdb, hot.Config{Prefix: prefix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func hotRange(t testing.TB, s *hot.Store, tn domain.TenantID, topic domain.Topic, to int64) []hot.Message {
	t.Helper()
	msgs, _, err := s.Range(testCtx(t), tn, topic, 1, to)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// TestSendRecallEditEndInFinalStateInMySQLAndRedis runs both projections on the same events,
// published in the order send, recall, edit: both read models end in the final state.
func TestSendRecallEditEndInFinalStateInMySQLAndRedis(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	m := newMySQL(t)
	hs := newHot(t)
	tn := m.tenant("both")
	h.run(h.config(), projections.MessagesMySQL(m.store, ""), projections.MessagesHot(hs, ""))
	g := groupTopic(9)
	h.publish(
		sentEvent(tn, g, 1, 5, "keep"),
		sentEvent(tn, g, 2, 6, "secret"),
		sentEvent(tn, g, 3, 5, "draft"),
		recallEvent(tn, g, 2, 6, 1),
		editEvent(tn, g, 3, 5, 2, "final"),
	)
	eventually(t, 30*time.Second, func() error {
		sql := m.page(tn, g)
		if len(sql) != 3 || !sql[1].Recalled() || string(sql[2].Content) != `"final"` {
			return fmt.Errorf("mysql: %+v", sql)
		}
		red := hotRange(t, hs, tn, g, 3)
		if len(red) != 3 || !red[1].Recalled() || string(red[2].Content) != `"final"` {
			return fmt.Errorf("redis: %+v", red)
		}
		return nil
	})
	red := hotRange(t, hs, tn, g, 3)
	if red[1].Content != nil || string(red[0].Content) != `"keep"` || red[2].Version != 2 {
		t.Errorf("redis final state %+v", red)
	}
	if last, _, err := hs.LastSeq(testCtx(t), tn, g); err != nil || last != 3 {
		t.Errorf("hot last seq = %d, %v", last, err)
	}
}

// TestRebuildHotReappliesIntoRedis rebuilds the hot projection from the event store into an
// empty Redis prefix, then again (idempotent).
func TestRebuildHotReappliesIntoRedis(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	m := newMySQL(t)
	hs := newHot(t)
	tn := m.tenant("hotrb")
	store := newEventStore(t, h.pool)
	g := groupTopic(11)
	appendAll(t, store, []domain.Envelope{
		sentEvent(tn, g, 1, 5, "one"), sentEvent(tn, g, 2, 6, "two"), recallEvent(tn, g, 1, 5, 1),
	})
	rb, err := replay.NewHotRebuilder(hs, store, m.router, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		progress := &countingProgress{}
		res, err := rb.Rebuild(testCtx(t), replay.RebuildOptions{Projection: projections.ProjectionMessagesHot, Tenant: tn, Progress: progress.start})
		if err != nil || res.Events != 3 {
			t.Fatalf("rebuild hot: %+v, %v", res, err)
		}
		if progress.total != 3 || progress.added != 3 || progress.finished != 1 {
			t.Errorf("progress: %+v, want a total of 3, 3 added, finished once", *progress)
		}
		red := hotRange(t, hs, tn, g, 2)
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
