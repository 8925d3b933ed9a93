package account_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/domain"
)

// sessionNotes keeps the sign-outs Sessions announced.
type sessionNotes struct {
	mu    sync.Mutex
	ended []string
}

func (n *sessionNotes) SessionEnded(_ context.Context, _ domain.TenantID, _ domain.UserID, session string, _ time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ended = append(n.ended, session)
}

// selfEnv is a registered user with the self-service over a fresh database.
type selfEnv struct {
	*env
	self   *account.SelfService
	guard  *account.Guard
	notes  *sessionNotes
	tenant domain.TenantID
	user   domain.UserID
}

func newSelfEnv(t *testing.T) *selfEnv {
	t.Helper()
	e := newEnv(t, account.Deps{}, account.Config{})
	s := &selfEnv{env: e, notes: &sessionNotes{}, tenant: domain.MustTenantID("self")}
	var err error
	if s.guard, err = account.NewGuard(e.pool, account.GuardConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	gov, err := account.NewGovernance(account.GovernanceDeps{Pool: e.pool, Store: e.store, Accounts: e.svc, Guard: s.guard})
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := account.NewSessions(account.SessionDeps{Store: e.store, Guard: s.guard, Notifier: s.notes})
	if err != nil {
		t.Fatal(err)
	}
	if s.self, err = account.NewSelfService(e.svc, gov, sessions); err != nil {
		t.Fatal(err)
	}
	reg, err := e.svc.Register(testCtx(t), account.Register{Tenant: s.tenant, Login: "mei", Password: "correct horse"})
	if err != nil {
		t.Fatal(err)
	}
	s.user = reg.User
	return s
}

// start starts login session id, issued at issued, for an hour.
func (s *selfEnv) start(t *testing.T, id string, issued time.Time) {
	t.Helper()
	err := s.self.StartSession(testCtx(t), account.StartSession{Tenant: s.tenant, User: s.user, SessionID: id, Device: "phone",
		UserAgent: "test/1", IPHint: "192.0.2.0/24", StartedAt: issued, ExpiresAt: issued.Add(time.Hour)})
	if err != nil {
		t.Fatalf("start session %s: %v", id, err)
	}
}

func TestSessionsEndOneByOneAndTheGuardsLearnIt(t *testing.T) {
	t.Parallel()
	s := newSelfEnv(t)
	ctx := testCtx(t)
	issued := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	s.start(t, "sess-a", issued)
	s.start(t, "sess-b", issued)
	if err := s.self.StartSession(ctx, account.StartSession{Tenant: s.tenant, User: s.user, SessionID: "sess-a",
		StartedAt: issued, ExpiresAt: issued.Add(time.Hour)}); !errors.Is(err, domain.ErrConcurrency) {
		t.Fatalf("starting a session id twice: %v", err)
	}

	// Session b signs a out; a logs itself out again (nothing to do); b logs out.
	res, err := s.self.EndSession(ctx, account.EndSession{Tenant: s.tenant, User: s.user, SessionID: "sess-a", By: "sess-b"})
	if err != nil || res.Unchanged || !res.ExpiresAt.Equal(issued.Add(time.Hour)) {
		t.Fatalf("sign-out of a: %+v %v", res, err)
	}
	if err := s.guard.CheckSession(s.tenant, s.user, issued, "sess-a"); !errors.Is(err, account.ErrSessionRevoked) ||
		!errors.Is(err, account.ErrTokenRevoked) {
		t.Fatalf("a's token after its sign-out: %v", err)
	}
	if err := s.guard.CheckSession(s.tenant, s.user, issued, "sess-b"); err != nil {
		t.Fatalf("b's token after a's sign-out: %v", err)
	}
	if err := s.guard.CheckSession(s.tenant, s.user, issued, ""); err != nil {
		t.Fatalf("a token without a session after a's sign-out: %v", err)
	}
	if res, err := s.self.EndSession(ctx, account.EndSession{Tenant: s.tenant, User: s.user, SessionID: "sess-a"}); err != nil || !res.Unchanged {
		t.Fatalf("ending a again: %+v %v", res, err)
	}
	if _, err := s.self.EndSession(ctx, account.EndSession{Tenant: s.tenant, User: s.user, SessionID: "sess-b", By: "sess-b"}); err != nil {
		t.Fatal(err)
	}

	evs, err := s.store.ReadStream(ctx, s.tenant, domain.LoginSessionStreamID(s.user, "sess-a"), 0, 0)
	if err != nil || len(evs) != 2 || evs[1].EventType != domain.EventUserSessionEnded || evs[1].Actor.ID != s.user.String() {
		t.Fatalf("stream of a: %+v %v", evs, err)
	}
	var ended domain.UserSessionEnded
	if err := evs[1].Decode(&ended); err != nil || ended.Reason != domain.SessionEndSignedOut || ended.By != "sess-b" {
		t.Fatalf("a ended with %+v (%v)", ended, err)
	}
	if n := s.count(t, "SELECT count(*) FROM revoked_sessions WHERE user_id = $1", s.user.Int64()); n != 2 {
		t.Fatalf("%d revoked_sessions rows, want 2", n)
	}
	s.notes.mu.Lock()
	if got := strings.Join(s.notes.ended, ","); got != "sess-a,sess-a,sess-b" {
		t.Errorf("sign-outs told: %s", got)
	}
	s.notes.mu.Unlock()

	// Another node's guard loads the sign-outs.
	other, _ := account.NewGuard(s.pool, account.GuardConfig{}, nil)
	if err := other.Load(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sess-a", "sess-b"} {
		if err := other.CheckSession(s.tenant, s.user, issued, id); !errors.Is(err, account.ErrSessionRevoked) {
			t.Errorf("a loaded guard admits signed-out %s: %v", id, err)
		}
	}

	// Refusals write nothing.
	before := s.count(t, "SELECT count(*) FROM events")
	cases := []struct {
		name string
		cmd  account.EndSession
		want string
	}{
		{"a session never started", account.EndSession{Tenant: s.tenant, User: s.user, SessionID: "nope"}, domain.ReasonSessionNotFound},
		{"another user's session", account.EndSession{Tenant: s.tenant, User: s.user + 1, SessionID: "sess-a"}, domain.ReasonSessionNotFound},
		{"another tenant's session", account.EndSession{Tenant: acme, User: s.user, SessionID: "sess-a"}, domain.ReasonSessionNotFound},
		{"a malformed id", account.EndSession{Tenant: s.tenant, User: s.user, SessionID: "../x"}, "invalid:session_id:bad_format"},
	}
	for _, c := range cases {
		if _, err := s.self.EndSession(ctx, c.cmd); reason(err) != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
	if after := s.count(t, "SELECT count(*) FROM events"); after != before {
		t.Fatalf("refused sign-outs wrote %d events", after-before)
	}
}

func TestChangePasswordKeepsOnlyTheChangingSession(t *testing.T) {
	t.Parallel()
	s := newSelfEnv(t)
	ctx := testCtx(t)
	issued := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	s.start(t, "keep", issued)
	s.start(t, "other", issued)

	before := s.count(t, "SELECT count(*) FROM events")
	refusals := []struct {
		name string
		cmd  account.ChangePassword
		want string
	}{
		{"wrong old password", account.ChangePassword{Old: "wrong horse", New: "battery staple", Session: "keep"}, account.ReasonWrongPassword},
		{"new password too short", account.ChangePassword{Old: "correct horse", New: "short", Session: "keep"}, "invalid:password:too_short"},
		{"malformed session", account.ChangePassword{Old: "correct horse", New: "battery staple", Session: "a b"}, "invalid:session_id:bad_format"},
	}
	for _, c := range refusals {
		c.cmd.Tenant, c.cmd.User = s.tenant, s.user
		if _, err := s.self.ChangePassword(ctx, c.cmd); reason(err) != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
	if n := s.count(t, "SELECT count(*) FROM events"); n != before {
		t.Fatalf("refused changes wrote %d events", n-before)
	}
	if _, err := s.svc.Login(ctx, s.tenant, "mei", "correct horse"); err != nil {
		t.Fatalf("the password after refused changes: %v", err)
	}

	res, err := s.self.ChangePassword(ctx, account.ChangePassword{Tenant: s.tenant, User: s.user, Old: "correct horse",
		New: "battery staple", Session: "keep"})
	if err != nil || res.Status.KeptSession != "keep" || res.Status.NotBefore.IsZero() {
		t.Fatalf("change: %+v %v", res, err)
	}
	if _, err := s.svc.Login(ctx, s.tenant, "mei", "correct horse"); !errors.Is(err, account.ErrInvalidCredentials) {
		t.Fatalf("the old password after the change: %v", err)
	}
	if _, err := s.svc.Login(ctx, s.tenant, "mei", "battery staple"); err != nil {
		t.Fatalf("the new password: %v", err)
	}
	checks := []struct {
		name    string
		session string
		issued  time.Time
		revoked bool
	}{
		{"the changing session", "keep", issued, false},
		{"another session", "other", issued, true},
		{"a token without a session", "", issued, true},
		{"a token issued after the change", "other", time.Now().Add(time.Millisecond), false},
	}
	other, _ := account.NewGuard(s.pool, account.GuardConfig{}, nil)
	if err := other.Load(ctx); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*account.Guard{s.guard, other} {
		for _, c := range checks {
			err := g.CheckSession(s.tenant, s.user, c.issued, c.session)
			if got := errors.Is(err, account.ErrTokenRevoked); got != c.revoked {
				t.Errorf("%s: %v, want revoked %v", c.name, err, c.revoked)
			}
		}
	}

	// A change whose password was set but whose event was lost: running it again finishes it.
	if err := s.svc.SetPassword(ctx, s.tenant, s.user, "third password"); err != nil {
		t.Fatal(err)
	}
	events := s.count(t, "SELECT count(*) FROM events WHERE event_type = 'user.password_changed.v1'")
	if _, err := s.self.ChangePassword(ctx, account.ChangePassword{Tenant: s.tenant, User: s.user, Old: "battery staple",
		New: "third password", Session: "keep"}); err != nil {
		t.Fatalf("finishing a change: %v", err)
	}
	if n := s.count(t, "SELECT count(*) FROM events WHERE event_type = 'user.password_changed.v1'"); n != events+1 {
		t.Fatalf("finishing a change appended %d events", n-events)
	}
	if err := s.self.CheckPassword(ctx, s.tenant, s.user, "third password"); err != nil {
		t.Fatalf("check the current password: %v", err)
	}
	if err := s.self.CheckPassword(ctx, s.tenant, s.user, "battery staple"); reason(err) != account.ReasonWrongPassword {
		t.Fatalf("check a former password: %v", err)
	}
	if err := s.self.CheckPassword(ctx, s.tenant, s.user+7, "third password"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("check the password of nobody: %v", err)
	}
}

func TestContactsServeResetsOfTheirAccountOnly(t *testing.T) {
	t.Parallel()
	s := newSelfEnv(t)
	ctx := testCtx(t)
	phone, mail := strings.Repeat("a1", 32), strings.Repeat("b2", 32)
	if _, err := s.self.BindContact(ctx, account.BindContact{Tenant: s.tenant, User: s.user, Channel: "sms", TargetHash: phone}); err != nil {
		t.Fatal(err)
	}
	if uid, err := s.self.ResetSubject(ctx, s.tenant, "Mei", "sms", phone); err != nil || uid != s.user {
		t.Fatalf("reset subject by the bound phone: %v %v", uid, err)
	}
	mismatches := []struct{ name, login, channel, hash string }{
		{"another phone", "mei", "sms", mail},
		{"the phone's hash as an e-mail", "mei", "email", phone},
		{"an unknown login", "nobody", "sms", phone},
		{"a malformed login", "!", "sms", phone},
	}
	for _, m := range mismatches {
		if _, err := s.self.ResetSubject(ctx, s.tenant, m.login, m.channel, m.hash); reason(err) != account.ReasonContactMismatch {
			t.Errorf("%s: %v", m.name, err)
		}
	}
	if _, err := s.self.BindContact(ctx, account.BindContact{Tenant: s.tenant, User: s.user, Channel: "sms", TargetHash: mail}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.self.ResetSubject(ctx, s.tenant, "mei", "sms", phone); reason(err) != account.ReasonContactMismatch {
		t.Fatalf("the phone bound before: %v", err)
	}
	bad := []account.BindContact{
		{Tenant: s.tenant, User: s.user, Channel: "fax", TargetHash: phone},
		{Tenant: s.tenant, User: s.user, Channel: "sms", TargetHash: "not a hash"},
		{Tenant: s.tenant, User: s.user + 1, Channel: "sms", TargetHash: phone},
	}
	before := s.count(t, "SELECT count(*) FROM events")
	for _, b := range bad {
		if _, err := s.self.BindContact(ctx, b); err == nil {
			t.Errorf("bound %+v", b)
		}
	}
	if n := s.count(t, "SELECT count(*) FROM events"); n != before {
		t.Fatalf("refused bindings wrote %d events", n-before)
	}
	if n := s.count(t, "SELECT count(*) FROM events WHERE event_type = 'user.contact_changed.v1' AND payload->>'channel' = 'sms'"); n != 2 {
		t.Fatalf("%d contact events, want 2", n)
	}
}

func TestGuardForgetsExpiredSignOuts(t *testing.T) {
	t.Parallel()
	s := newSelfEnv(t)
	ctx := testCtx(t)
	long := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	s.start(t, "old", long) // its token expired an hour ago
	s.start(t, "new", time.Now().Truncate(time.Millisecond))
	for _, id := range []string{"old", "new"} {
		if _, err := s.self.EndSession(ctx, account.EndSession{Tenant: s.tenant, User: s.user, SessionID: id}); err != nil {
			t.Fatal(err)
		}
	}
	g, _ := account.NewGuard(s.pool, account.GuardConfig{RefreshInterval: 10 * time.Millisecond, RevokedGrace: time.Minute}, nil)
	if err := g.Load(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Run(rctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.count(t, "SELECT count(*) FROM revoked_sessions WHERE session_id = 'old'") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the expired sign-out's row was never deleted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := g.CheckSession(s.tenant, s.user, time.Now().Add(-time.Minute), "new"); !errors.Is(err, account.ErrSessionRevoked) {
		t.Fatalf("the running guard admits a live signed-out session: %v", err)
	}
	cancel()
	<-done
	if n := s.count(t, "SELECT count(*) FROM revoked_sessions"); n != 1 {
		t.Fatalf("%d rows left, want the live sign-out's", n)
	}
}

// TestGuardIsSafeForConcurrentUse checks, revokes and reloads at once (run with -race).
func TestGuardIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	s := newSelfEnv(t)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				id := string(rune('a'+w)) + "-" + strings.Repeat("x", i%5+1)
				s.guard.RevokeSession(s.tenant, s.user, id, time.Now().Add(time.Hour))
				if err := s.guard.CheckSession(s.tenant, s.user, time.Now(), id); !errors.Is(err, account.ErrSessionRevoked) {
					t.Errorf("revoked %s admitted: %v", id, err)
					return
				}
				if i%50 == 0 {
					if err := s.guard.Load(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}
