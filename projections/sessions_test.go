package projections_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/sessions"
	"github.com/imledger/imledger/replay"
)

// The sessions projection builds who was online when from im.session.event in its own consumer
// group; replay verifies it against the log, finds a row changed by hand and rebuilds it.
func TestSessionsProjectionRebuildsAndVerifies(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	ss, err := sessions.NewStore(m.Router)
	if err != nil {
		t.Fatal(err)
	}
	tn := m.Tenant("sessions")
	store := projtest.NewEventStore(t, h.Pool)
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	history := projtest.AppendAll(t, store, []domain.Envelope{
		projtest.SessionEvent(tn, 1, "a", true, t0), projtest.SessionEvent(tn, 2, "b", true, t0.Add(time.Minute)),
		projtest.SessionEvent(tn, 1, "a", false, t0.Add(5*time.Minute)), projtest.SessionEvent(tn, 3, "c", true, t0.Add(6*time.Minute)),
	})
	p := projections.SessionsMySQL(ss, "")
	if p.ConsumerGroup != projections.GroupSessionsMySQL || p.Topics[0] != "im.session.event" {
		t.Fatalf("projection %+v", p)
	}
	h.Run(h.Config(), p)
	h.Publish(history...)
	projtest.Eventually(t, 30*time.Second, func() error {
		online, err := ss.OnlineAt(projtest.Ctx(t), tn, t0.Add(3*time.Minute), 0)
		if err != nil || len(online) != 2 {
			return fmt.Errorf("online at +3m: %+v %v", online, err)
		}
		if later, _ := ss.OnlineAt(projtest.Ctx(t), tn, t0.Add(10*time.Minute), 0); len(later) != 2 || later[0].User != 2 || later[1].User != 3 {
			return fmt.Errorf("online at +10m: %+v", later)
		}
		return nil
	})
	rb, err := replay.NewSessionsRebuilder(ss, store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	verify := func() (replay.Verification[readmodels.TableSummary], string) {
		t.Helper()
		var out bytes.Buffer
		res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn, Out: &out})
		if err != nil {
			t.Fatal(err)
		}
		return res, out.String()
	}
	if res, out := verify(); !res.OK() || res.Live["im_sessions"].Rows != 3 || res.Events != 4 {
		t.Fatalf("live sessions differ from the log: %+v\n%s", res, out)
	}
	db, err := m.Router.DB(projtest.Ctx(t), tn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(projtest.Ctx(t), "UPDATE im_sessions SET closed_at = NULL WHERE user_id = 1"); err != nil {
		t.Fatal(err)
	}
	if res, out := verify(); res.OK() || !strings.Contains(out, "im_sessions") {
		t.Fatalf("a session reopened by hand was not found: %+v\n%s", res, out)
	}
	if _, err := rb.Rebuild(projtest.Ctx(t), replay.RebuildOptions{Tenant: tn}); err != nil {
		t.Fatal(err)
	}
	if res, out := verify(); !res.OK() {
		t.Fatalf("after the rebuild: %+v\n%s", res, out)
	}
	if got, _ := ss.OnlineAt(projtest.Ctx(t), tn, t0.Add(10*time.Minute), 0); len(got) != 2 {
		t.Errorf("after the rebuild %d sessions are online at +10m, want 2", len(got))
	}
}
