package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

// TestTokenCutoffKeepsOnlyWhatPassedBefore walks a user's account through revocations and password
// changes and checks, after each, which tokens pass: the kept session keeps exactly the tokens that
// passed before the change; every other token issued before the change fails.
func TestTokenCutoffKeepsOnlyWhatPassedBefore(t *testing.T) {
	t.Parallel()
	at := func(m int) time.Time { return time.Date(2026, 1, 1, 10, m, 0, 0, time.UTC) }
	type tok struct {
		name    string
		issued  time.Time
		session string
	}
	var (
		x1     = tok{"x issued at 1", at(1), "x"}
		x3     = tok{"x issued at 3", at(3), "x"}
		y2     = tok{"y issued at 2", at(2), "y"}
		legacy = tok{"no session, issued at 2", at(2), ""}
		y6     = tok{"y issued at 6", at(6), "y"}
		x7     = tok{"x issued at 7", at(7), "x"}
	)
	steps := []struct {
		name   string
		event  any
		admits map[tok]bool
	}{
		{"nothing yet", nil, map[tok]bool{x1: true, x3: true, y2: true, legacy: true}},
		{"revoked at 2", &domain.UserTokensRevoked{NotBefore: at(2)}, map[tok]bool{x1: false, x3: true, y2: true, legacy: true}},
		{"password changed at 4 from x", &domain.UserPasswordChanged{KeptSession: "x", ChangedAt: at(4)},
			map[tok]bool{x1: false, x3: true, y2: false, legacy: false}},
		{"changed again at 5 from x", &domain.UserPasswordChanged{KeptSession: "x", ChangedAt: at(5)},
			map[tok]bool{x1: false, x3: true, y2: false}},
		{"changed at 8 from y", &domain.UserPasswordChanged{KeptSession: "y", ChangedAt: at(8)},
			map[tok]bool{x3: false, x7: false, y2: false, y6: true}},
		{"password reset at 9", &domain.UserPasswordReset{ResetAt: at(9)}, map[tok]bool{y6: false, x7: false}},
		{"changed at 10 without a session", &domain.UserPasswordChanged{ChangedAt: at(10)}, map[tok]bool{y6: false}},
	}
	var c domain.TokenCutoff
	for _, s := range steps {
		if s.event != nil {
			var changed bool
			if c, changed = domain.FoldCutoff(c, s.event); !changed {
				t.Fatalf("%s: the cutoff did not take %T", s.name, s.event)
			}
		}
		for k, want := range s.admits {
			if got := c.Admits(k.issued, k.session); got != want {
				t.Errorf("after %s: %s admitted %v, want %v (cutoff %+v)", s.name, k.name, got, want, c)
			}
		}
		if !c.Admits(time.Time{}, "") {
			t.Errorf("after %s: a login being decided (no issue time) was refused", s.name)
		}
	}
	if _, changed := domain.FoldCutoff(c, &domain.UserKicked{}); changed {
		t.Error("a kick changed the cutoff")
	}
}

func TestLoginSessionStartsOnceAndEndsOnce(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC)
	s, err := domain.NewLoginSession(tenantA, 42, "0194c0de-aaaa-7bbb-8ccc-123456789abc")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.End("", now); reasonOf(err) != domain.ReasonSessionNotFound {
		t.Fatalf("ending a session never started: %v", err)
	}
	evs, err := s.Start(domain.SessionStart{Device: "Mei's phone", UserAgent: "imledger-ios/1.2", IPHint: "203.0.113.0/24",
		StartedAt: now, ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	s = fold(t, s, evs)
	if !s.Started() || s.Ended() || !s.ExpiresAt().Equal(now.Add(time.Hour)) {
		t.Fatalf("started session: %+v", s)
	}
	if _, err := s.Start(domain.SessionStart{StartedAt: now, ExpiresAt: now.Add(time.Hour)}); reasonOf(err) != "invalid:session_id:taken" {
		t.Fatalf("starting it twice: %v", err)
	}
	evs, err = s.End("other-session", now.Add(time.Minute))
	if err != nil || len(evs) != 1 {
		t.Fatalf("sign-out: %v %v", evs, err)
	}
	if p := evs[0].Payload.(*domain.UserSessionEnded); p.Reason != domain.SessionEndSignedOut || p.By != "other-session" ||
		!p.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("ended payload %+v", p)
	}
	s = fold(t, s, evs)
	if evs, err := s.End("", now.Add(2*time.Minute)); err != nil || len(evs) != 0 {
		t.Fatalf("ending an ended session decided %v, %v", evs, err)
	}
}

func TestLoginSessionRefusesBadInput(t *testing.T) {
	t.Parallel()
	now := time.Now()
	long := strings.Repeat("1", 65)
	cases := []struct {
		name   string
		id     string
		in     domain.SessionStart
		field  string
		reason string
	}{
		{"empty id", "", domain.SessionStart{StartedAt: now, ExpiresAt: now.Add(time.Hour)}, "session_id", "required"},
		{"id with a slash", "a/b", domain.SessionStart{StartedAt: now, ExpiresAt: now.Add(time.Hour)}, "session_id", "bad_format"},
		{"device on two lines", "s1", domain.SessionStart{Device: "a\nb", StartedAt: now, ExpiresAt: now.Add(time.Hour)}, "device", "bad_format"},
		{"device too long", "s1", domain.SessionStart{Device: strings.Repeat("é", 65),
			StartedAt: now, ExpiresAt: now.Add(time.Hour)}, "device", "too_long"},
		{"ip hint too long", "s1", domain.SessionStart{IPHint: long, StartedAt: now, ExpiresAt: now.Add(time.Hour)}, "ip_hint", "too_long"},
		{"expiry before the start", "s1", domain.SessionStart{StartedAt: now, ExpiresAt: now}, "expires_at", "bad_format"},
	}
	for _, c := range cases {
		s, err := domain.NewLoginSession(tenantA, 7, c.id)
		if err == nil {
			_, err = s.Start(c.in)
		}
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || ve.Reason != c.reason {
			t.Errorf("%s: %v, want %s/%s", c.name, err, c.field, c.reason)
		}
	}
}

func TestAccountStateFoldsPasswordChangesAndContacts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	st, _ := domain.NewAccountState(tenantA, 42)
	evs, err := st.ChangePassword("sess-a", now)
	if err != nil {
		t.Fatal(err)
	}
	more, err := st.ChangeContact("email", now)
	if err != nil {
		t.Fatal(err)
	}
	envs, err := domain.NewEnvelopes(tenantA, domain.Actor{Type: domain.ActorUser, ID: "42"}, append(evs, more...))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range envs {
		if err := st.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	want := domain.TokenCutoff{NotBefore: now, KeptSession: "sess-a"}
	if st.Version() != 2 || st.Cutoff() != want {
		t.Fatalf("folded version %d cutoff %+v, want 2 and %+v", st.Version(), st.Cutoff(), want)
	}
	restored, _ := domain.RestoreAccountState(tenantA, 42, 2, false, now)
	if restored.WithKeptSession("sess-a", time.Time{}).Cutoff() != want {
		t.Fatalf("restored cutoff %+v", restored.WithKeptSession("sess-a", time.Time{}).Cutoff())
	}
	if _, err := st.ChangeContact("fax", now); reasonOf(err) != "invalid:channel:unknown" {
		t.Fatalf("a contact of channel fax: %v", err)
	}
	if _, err := st.ChangePassword("bad id!", now); reasonOf(err) != "invalid:session_id:bad_format" {
		t.Fatalf("a kept session with a bad id: %v", err)
	}
}

// fold applies events decided for s to it, as the event store would number them.
func fold(t *testing.T, s domain.LoginSession, evs []domain.PendingEvent) domain.LoginSession {
	t.Helper()
	envs, err := domain.NewEnvelopes(tenantA, domain.Actor{Type: domain.ActorUser, ID: "42"}, evs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range envs {
		if err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	return s
}
