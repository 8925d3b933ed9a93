package projections_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/login"
	"github.com/imledger/imledger/replay"
)

// TestLoginSessionsProjectAndRebuild: the login-sessions projection folds the session events and
// the account cutoff events of im.business.event into im_login_sessions and im_login_cutoffs;
// verify matches, names the table a hand edit changed, and a rebuild restores it.
func TestLoginSessionsProjectAndRebuild(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	tn := m.Tenant("logins")
	store := projtest.NewEventStore(t, h.Pool)
	rows := login.New(m.Router)
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	const u domain.UserID = 42
	start := func(id string, at time.Time) domain.Envelope {
		return projtest.MustEnvelope(tn, domain.LoginSessionStreamID(u, id), 1, domain.EventUserSessionStarted, domain.UserSessionStarted{
			User: u, SessionID: id, Device: "laptop", StartedAt: at, ExpiresAt: at.Add(time.Hour)})
	}
	history := []domain.Envelope{
		start("s1", t0), start("s2", t0), start("s3", t0.Add(time.Second)),
		projtest.MustEnvelope(tn, domain.LoginSessionStreamID(u, "s1"), 2, domain.EventUserSessionEnded, domain.UserSessionEnded{
			User: u, SessionID: "s1", Reason: domain.SessionEndLogout, EndedAt: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Hour)}),
		projtest.MustEnvelope(tn, domain.AccountStreamID(u), 1, domain.EventUserPasswordChanged, domain.UserPasswordChanged{
			User: u, KeptSession: "s2", ChangedAt: t0.Add(500 * time.Millisecond)}),
	}
	history = projtest.AppendAll(t, store, history)
	p := projections.LoginSessions(rows, "")
	if p.ConsumerGroup != projections.GroupLoginSessions || p.Topics[0] != "im.business.event" || p.Accept(domain.EventUserProfileUpdated) ||
		!p.Accept(domain.EventUserTokensRevoked) {
		t.Fatalf("projection %+v", p)
	}
	h.Run(h.Config(), p)
	h.Publish(history...)
	active := func() string {
		got, err := rows.ActiveSessions(projtest.Ctx(t), tn, u, time.Now())
		if err != nil {
			return err.Error()
		}
		var ids []string
		for _, s := range got {
			ids = append(ids, s.SessionID+"@"+s.StartedAt.Format(time.RFC3339Nano))
		}
		return fmt.Sprint(ids)
	}
	projtest.Eventually(t, 30*time.Second, func() error {
		got, err := rows.ActiveSessions(projtest.Ctx(t), tn, u, time.Now())
		if err != nil || len(got) != 2 || got[0].SessionID != "s3" || got[1].SessionID != "s2" {
			return fmt.Errorf("active sessions %v (%v), want s3 and s2 (s1 logged out, the change kept s2)", got, err)
		}
		return nil
	})
	rb, err := replay.NewLoginSessionRebuilder(rows, store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn})
	if err != nil || !res.OK() || res.Live["im_login_sessions"].Rows != 3 || res.Live["im_login_cutoffs"].Rows != 1 {
		t.Fatalf("verify of the projected sessions: %+v %v", res, err)
	}
	db, err := m.Router.DB(projtest.Ctx(t), tn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(projtest.Ctx(t), "UPDATE im_login_sessions SET ended_at = NULL WHERE session_id = 's1'"); err != nil {
		t.Fatal(err)
	}
	if res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn}); err != nil || len(res.Diffs) != 1 || res.Diffs[0].Part != "im_login_sessions" {
		t.Fatalf("verify after a logout was undone by hand: %+v %v", res, err)
	}
	if _, err := rb.Rebuild(projtest.Ctx(t), replay.RebuildOptions{Tenant: tn}); err != nil {
		t.Fatal(err)
	}
	if got, want := active(), fmt.Sprint([]string{"s3@" + t0.Add(time.Second).Format(time.RFC3339Nano), "s2@" + t0.Format(time.RFC3339Nano)}); got != want {
		t.Fatalf("after the rebuild: %s, want %s", got, want)
	}
	if res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn}); err != nil || !res.OK() {
		t.Fatalf("verify after the rebuild: %+v %v", res, err)
	}
}
