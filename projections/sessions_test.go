package projections_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/sessions"
	"github.com/imledger/imledger/replay"
)

func sessionEvent(tenant domain.TenantID, user domain.UserID, sid string, open bool, at time.Time) domain.Envelope {
	if open {
		return mustEnvelope(tenant, domain.SessionStreamID(user, sid), 1, domain.EventSessionOpened,
			domain.SessionOpened{User: user, SessionID: sid, Node: "node-a", UserAgent: "test", OpenedAt: at})
	}
	return mustEnvelope(tenant, domain.SessionStreamID(user, sid), 2, domain.EventSessionClosed,
		domain.SessionClosed{User: user, SessionID: sid, Node: "node-a", Reason: "client_closed", ClosedAt: at})
}

// The sessions projection builds who was online when from im.session.event in its own consumer
// group; replay verifies it against the log, finds a row changed by hand and rebuilds it.
func TestSessionsProjectionRebuildsAndVerifies(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	m := newMySQL(t)
	ss, err := sessions.NewStore(m.router)
	if err != nil {
		t.Fatal(err)
	}
	tn := m.tenant("sessions")
	store := newEventStore(t, h.pool)
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	history := appendAll(t, store, []domain.Envelope{
		sessionEvent(tn, 1, "a", true, t0), sessionEvent(tn, 2, "b", true, t0.Add(time.Minute)),
		sessionEvent(tn, 1, "a", false, t0.Add(5*time.Minute)), sessionEvent(tn, 3, "c", true, t0.Add(6*time.Minute)),
	})
	p := projections.SessionsMySQL(ss, "")
	if p.ConsumerGroup != projections.GroupSessionsMySQL || p.Topics[0] != "im.session.event" {
		t.Fatalf("projection %+v", p)
	}
	h.run(h.config(), p)
	h.publish(history...)
	eventually(t, 30*time.Second, func() error {
		online, err := ss.OnlineAt(testCtx(t), tn, t0.Add(3*time.Minute), 0)
		if err != nil || len(online) != 2 {
			return fmt.Errorf("online at +3m: %+v %v", online, err)
		}
		if later, _ := ss.OnlineAt(testCtx(t), tn, t0.Add(10*time.Minute), 0); len(later) != 2 || later[0].User != 2 || later[1].User != 3 {
			return fmt.Errorf("online at +10m: %+v", later)
		}
		return nil
	})
	rb, err := replay.NewSessionsRebuilder(ss, store, m.router, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	verify := func() (replay.Verification[readmodels.TableSummary], string) {
		t.Helper()
		var out bytes.Buffer
		res, err := rb.Verify(testCtx(t), replay.VerifyOptions{Tenant: tn, Out: &out})
		if err != nil {
			t.Fatal(err)
		}
		return res, out.String()
	}
	if res, out := verify(); !res.OK() || res.Live["im_sessions"].Rows != 3 || res.Events != 4 {
		t.Fatalf("live sessions differ from the log: %+v\n%s", res, out)
	}
	db, err := m.router.DB(testCtx(t), tn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(testCtx(t), "UPDATE im_sessions SET closed_at = NULL WHERE user_id = 1"); err != nil {
		t.Fatal(err)
	}
	if res, out := verify(); res.OK() || !strings.Contains(out, "im_sessions") {
		t.Fatalf("a session reopened by hand was not found: %+v\n%s", res, out)
	}
	if _, err := rb.Rebuild(testCtx(t), replay.RebuildOptions{Tenant: tn}); err != nil {
		t.Fatal(err)
	}
	if res, out := verify(); !res.OK() {
		t.Fatalf("after the rebuild: %+v\n%s", res, out)
	}
	if got, _ := ss.OnlineAt(testCtx(t), tn, t0.Add(10*time.Minute), 0); len(got) != 2 {
		t.Errorf("after the rebuild %d sessions are online at +10m, want 2", len(got))
	}
}
