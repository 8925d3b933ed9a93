package rest_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/rest"
)

// selfStack is an API with the account self-service and a registered user, alice.
func selfStack(t *testing.T, cfg rest.Config, o stackOpts) *stack {
	t.Helper()
	o.reads, o.more, o.self = true, true, true
	s := newStack(t, cfg, o)
	s.registerUser(t, "alice", "correct horse")
	return s
}

// sessionsOf lists the sessions as token's holder sees them: "id[*]" per session, * marking the
// current one, after projecting the log.
func (s *stack) sessionsOf(t *testing.T, token string) []string {
	t.Helper()
	s.project(t)
	a := s.do(t, req{method: http.MethodGet, path: "/v1/im/account/sessions", token: token})
	expect(t, "list sessions", a, http.StatusOK, "ok")
	var out []string
	for _, x := range a.data(t)["sessions"].([]any) {
		m := x.(map[string]any)
		id := m["session_id"].(string)
		if m["current"] == true {
			id += "*"
		}
		out = append(out, id)
	}
	return out
}

// TestLoginSessionsAreListedAndSignedOutOneByOne: each login is a session of its own, listed
// with its device; signing one out (or logging it out) refuses its token at once and leaves the
// others; another user's session, an unknown one and a token without a session are refused.
func TestLoginSessionsAreListedAndSignedOutOneByOne(t *testing.T) {
	t.Parallel()
	s := selfStack(t, rest.Config{}, stackOpts{})
	phone := s.signIn(t, "alice", "correct horse", "Alice's phone")
	laptop := s.signIn(t, "alice", "correct horse", "laptop")
	s.registerUser(t, "bob", "battery staple")
	bob := s.signIn(t, "bob", "battery staple", "bob's")
	if p, err := s.signer.Verify(phone.token); err != nil || p.Session != phone.id {
		t.Fatalf("the phone's token names session %q (%v), want %s", p.Session, err, phone.id)
	}

	if got := s.sessionsOf(t, laptop.token); !slices.Equal(got, []string{laptop.id + "*", phone.id}) {
		t.Fatalf("alice's sessions from the laptop: %v", got)
	}
	s.project(t)
	a := s.do(t, req{method: http.MethodGet, path: "/v1/im/account/sessions", token: phone.token})
	first := a.data(t)["sessions"].([]any)[1].(map[string]any)
	if first["device"] != "Alice's phone" || first["user_agent"] != "imledger-test/1.0 (Alice's phone)" ||
		first["ip_hint"] != "127.0.0.0/24" || first["current"] != true || first["started_at"] == "" {
		t.Fatalf("the phone's session as listed: %v", first)
	}

	signOut := func(tok, id, key string) answer {
		return s.do(t, req{method: http.MethodDelete, path: "/v1/im/account/sessions/" + id, token: tok, key: key})
	}
	presence := func(tok string) answer {
		return s.do(t, req{method: http.MethodGet, path: "/v1/im/users/me/presence", token: tok})
	}
	events := s.events(t, "")
	expect(t, "sign out bob's session from alice's laptop", signOut(laptop.token, bob.id, "k1"), http.StatusForbidden, domain.ReasonSessionNotFound)
	expect(t, "sign out an unknown session", signOut(laptop.token, "no-such-session", "k2"), http.StatusForbidden, domain.ReasonSessionNotFound)
	expect(t, "sign out a malformed id", signOut(laptop.token, "a.b", "k3"), http.StatusBadRequest, rest.ReasonInvalid)
	if n := s.events(t, ""); n != events {
		t.Fatalf("refused sign-outs wrote %d events", n-events)
	}
	expect(t, "bob after alice's refused sign-out", presence(bob.token), http.StatusOK, "ok")

	a = signOut(laptop.token, phone.id, "k4")
	expect(t, "sign the phone out from the laptop", a, http.StatusOK, "ok")
	if a.data(t)["unchanged"] != false {
		t.Fatalf("sign-out: %s", a.Raw)
	}
	expect(t, "the phone's token", presence(phone.token), http.StatusUnauthorized, rest.ReasonSessionRevoked)
	expect(t, "the laptop's token", presence(laptop.token), http.StatusOK, "ok")
	if a := signOut(laptop.token, phone.id, "k5"); a.Status != http.StatusOK || a.data(t)["unchanged"] != true {
		t.Fatalf("signing the phone out again: %s", a.Raw)
	}
	if got := s.sessionsOf(t, laptop.token); !slices.Equal(got, []string{laptop.id + "*"}) {
		t.Fatalf("alice's sessions after the phone's sign-out: %v", got)
	}

	expect(t, "logout without an Idempotency-Key", s.do(t, req{method: http.MethodPost, path: "/v1/im/account/logout", token: laptop.token}),
		http.StatusBadRequest, rest.ReasonIdempotencyKeyRequired)
	expect(t, "logout", s.do(t, req{method: http.MethodPost, path: "/v1/im/account/logout", token: laptop.token, key: "out"}), http.StatusOK, "ok")
	expect(t, "the laptop after its logout", presence(laptop.token), http.StatusUnauthorized, rest.ReasonSessionRevoked)
	expect(t, "bob after alice logged out", presence(bob.token), http.StatusOK, "ok")
	legacy := s.token(t, s.tenant, 9)
	expect(t, "logout with a token without a session", s.do(t, req{method: http.MethodPost, path: "/v1/im/account/logout", token: legacy, key: "l"}),
		http.StatusForbidden, rest.ReasonNoSession)
	if n := s.events(t, "user.session_ended.v1"); n != 2 {
		t.Fatalf("%d session_ended events, want the phone's and the laptop's", n)
	}
	again := s.signIn(t, "alice", "correct horse", "laptop")
	if got := s.sessionsOf(t, again.token); !slices.Equal(got, []string{again.id + "*"}) {
		t.Fatalf("alice's sessions after logging in again: %v", got)
	}
	expect(t, "login with a device on two lines", s.loginAs(t, "alice", "correct horse", "a\nb"), http.StatusBadRequest, rest.ReasonInvalid)
}

func TestLogoutEverywhereRevokesEveryToken(t *testing.T) {
	t.Parallel()
	s := selfStack(t, rest.Config{}, stackOpts{})
	a, b := s.signIn(t, "alice", "correct horse", "a"), s.signIn(t, "alice", "correct horse", "b")
	uid, _ := domain.ParseUserID(a.user)
	legacy := s.token(t, s.tenant, uid)
	time.Sleep(2 * time.Millisecond)
	r := s.do(t, req{method: http.MethodPost, path: "/v1/im/account/logout-everywhere", token: a.token, key: "everywhere"})
	expect(t, "logout everywhere", r, http.StatusOK, "ok")
	for name, tok := range map[string]string{"the caller's": a.token, "another session's": b.token, "a token without a session": legacy} {
		expect(t, name+" token after logout everywhere", s.do(t, req{method: http.MethodGet, path: "/v1/im/users/me/presence", token: tok}),
			http.StatusUnauthorized, rest.ReasonTokenRevoked)
	}
	fresh := s.signIn(t, "alice", "correct horse", "c")
	expect(t, "a new login", s.do(t, req{method: http.MethodGet, path: "/v1/im/users/me/presence", token: fresh.token}), http.StatusOK, "ok")
	if got := s.sessionsOf(t, fresh.token); !slices.Equal(got, []string{fresh.id + "*"}) {
		t.Fatalf("sessions after logout everywhere: %v", got)
	}
	if n := s.count(t, "SELECT count(*) FROM events WHERE event_type = 'user.tokens_revoked.v1' AND payload->>'reason' = 'logout_everywhere' AND actor_id = $1", a.user); n != 1 {
		t.Fatalf("%d logout_everywhere revocations by the user", n)
	}
}

// TestChangePassword: a wrong old password, a bad new one and a request over the limit change
// nothing; a change keeps the session it was made from and ends the others; the passwords are in
// no event, no log line and no idempotency record.
func TestChangePassword(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := selfStack(t, rest.Config{AccountPerUser: 4, Logger: logger}, stackOpts{})
	keep, other := s.signIn(t, "alice", "correct horse", "keep"), s.signIn(t, "alice", "correct horse", "other")
	change := func(tok, old, new string) answer {
		return s.do(t, req{method: http.MethodPut, path: "/v1/im/account/password", token: tok,
			body: fmt.Sprintf(`{"old_password":%q,"new_password":%q}`, old, new)})
	}
	presence := func(tok string) answer {
		return s.do(t, req{method: http.MethodGet, path: "/v1/im/users/me/presence", token: tok})
	}
	events := s.events(t, "")
	expect(t, "a wrong old password", change(keep.token, "wrong horse", "new secret 1"), http.StatusForbidden, "wrong_password")
	a := change(keep.token, "correct horse", "short")
	expect(t, "a short new password", a, http.StatusBadRequest, rest.ReasonInvalid)
	if a.Body.Details["field"] != "password" || a.Body.Details["reason"] != "too_short" {
		t.Fatalf("short password details: %v", a.Body.Details)
	}
	if n := s.events(t, ""); n != events {
		t.Fatalf("refused changes wrote %d events", n-events)
	}
	expect(t, "the other session after refused changes", presence(other.token), http.StatusOK, "ok")

	a = change(keep.token, "correct horse", "new secret 1")
	expect(t, "change the password", a, http.StatusOK, "ok")
	if a.data(t)["kept_session"] != keep.id {
		t.Fatalf("change answered %s", a.Raw)
	}
	expect(t, "the changing session", presence(keep.token), http.StatusOK, "ok")
	expect(t, "the other session", presence(other.token), http.StatusUnauthorized, rest.ReasonTokenRevoked)
	expect(t, "the old password", s.loginAs(t, "alice", "correct horse", "x"), http.StatusUnauthorized, rest.ReasonInvalidCredentials)
	fresh := s.signIn(t, "alice", "new secret 1", "fresh")
	if got := s.sessionsOf(t, keep.token); !slices.Equal(got, []string{fresh.id, keep.id + "*"}) {
		t.Fatalf("sessions after the change: %v", got)
	}
	// Repeating the change (a retry after a lost answer) succeeds and changes nothing more.
	expect(t, "the same change again", change(keep.token, "correct horse", "new secret 1"), http.StatusOK, "ok")
	expect(t, "the new login after the repeat", presence(fresh.token), http.StatusUnauthorized, rest.ReasonTokenRevoked)

	// Four a minute per user, right or wrong: the fifth is refused and writes nothing.
	events = s.events(t, "")
	expect(t, "over the limit", change(keep.token, "new secret 1", "new secret 2"), http.StatusTooManyRequests, rest.ReasonRateLimited)
	if n := s.events(t, ""); n != events {
		t.Fatalf("a limited change wrote %d events", n-events)
	}
	expect(t, "the password after the limited change", s.loginAs(t, "alice", "new secret 1", "y"), http.StatusOK, "ok")

	for _, secret := range []string{"correct horse", "new secret 1", "new secret 2", "wrong horse"} {
		if n := s.count(t, "SELECT count(*) FROM events WHERE payload::text LIKE $1", "%"+secret+"%"); n != 0 {
			t.Errorf("%d events hold the password %q", n, secret)
		}
		mu.Lock()
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds the password %q", secret)
		}
		mu.Unlock()
	}
	if n := s.count(t, "SELECT count(*) FROM http_idempotency"); n != 0 {
		t.Fatalf("%d idempotency records: a password change keeps none", n)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestPasswordResetByCode: a contact bound at registration (with a code) or from the account
// (password and a change_phone code) serves resets; a wrong code, a contact of another account, a
// bad new password, a reused token and a wrong password are refused and change nothing; a reset
// ends every session of the account.
func TestPasswordResetByCode(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true, more: true, self: true})
	const alicePhone, bobPhone = "+8613800000001", "+8613800000002"
	code := s.sendCode(t, "register", alicePhone)
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/register", body: fmt.Sprintf(
		`{"tenant":%q,"login":"alice","password":"correct horse","phone":%q,"code":%q}`, s.tenant, alicePhone, code)})
	expect(t, "register with a phone and its code", a, http.StatusCreated, "ok")
	if n := s.events(t, "user.contact_changed.v1"); n != 1 {
		t.Fatalf("%d contact events after a registration with a code", n)
	}
	s.registerUser(t, "bob", "battery staple")
	bob := s.signIn(t, "bob", "battery staple", "bob")
	bind := func(password, code string) answer {
		return s.do(t, req{method: http.MethodPut, path: "/v1/im/account/contact", token: bob.token,
			body: fmt.Sprintf(`{"password":%q,"phone":%q,"code":%q}`, password, bobPhone, code)})
	}
	code = s.sendCode(t, "change_phone", bobPhone)
	expect(t, "bind with a wrong password", bind("wrong", code), http.StatusForbidden, "wrong_password")
	if n := s.events(t, "user.contact_changed.v1"); n != 1 {
		t.Fatalf("a refused binding wrote an event")
	}
	expect(t, "bind with the password (the code was not spent)", bind("battery staple", code), http.StatusOK, "ok")
	expect(t, "bind with the code again", bind("battery staple", code), http.StatusForbidden, "code_not_found")

	resetToken := func(login, phone, code string) answer {
		return s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/password-reset/token",
			body: fmt.Sprintf(`{"tenant":%q,"login":%q,"phone":%q,"code":%q}`, s.tenant, login, phone, code)})
	}
	reset := func(token, password string) answer {
		return s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/password-reset",
			body: fmt.Sprintf(`{"tenant":%q,"token":%q,"new_password":%q}`, s.tenant, token, password)})
	}
	alice := s.signIn(t, "alice", "correct horse", "phone")
	events := s.events(t, "")
	code = s.sendCode(t, "reset_password", alicePhone)
	wrong := "000000"
	if code == wrong {
		wrong = "111111"
	}
	expect(t, "a wrong code", resetToken("alice", alicePhone, wrong), http.StatusForbidden, "code_invalid")
	expect(t, "bob's login with alice's phone", resetToken("bob", alicePhone, code), http.StatusForbidden, "contact_mismatch")
	expect(t, "the code again", resetToken("alice", alicePhone, code), http.StatusForbidden, "code_not_found")
	expect(t, "an unknown login with bob's phone", resetToken("nobody", bobPhone, s.sendCode(t, "reset_password", bobPhone)),
		http.StatusForbidden, "contact_mismatch")
	if n := s.count(t, "SELECT count(*) FROM events WHERE event_type LIKE 'action_token.%'"); n != 0 {
		t.Fatalf("refused resets issued %d token events", n)
	}
	a = resetToken("Alice", alicePhone, s.sendCode(t, "reset_password", alicePhone))
	expect(t, "a verified reset", a, http.StatusCreated, "ok")
	token := a.data(t)["token"].(string)
	if exp, err := time.Parse(time.RFC3339Nano, a.data(t)["expires_at"].(string)); err != nil || time.Until(exp) > 15*time.Minute {
		t.Fatalf("reset token expiry %v (%v)", a.data(t)["expires_at"], err)
	}
	if n := s.events(t, ""); n != events+1 {
		t.Fatalf("%d events since the first reset try, want the token's issue alone", n-events)
	}
	expect(t, "a short new password", reset(token, "short"), http.StatusBadRequest, rest.ReasonInvalid)
	expect(t, "alice's session before the reset", s.do(t, req{method: http.MethodGet, path: "/v1/im/users/me/presence", token: alice.token}),
		http.StatusOK, "ok")
	a = reset(token, "a brand new secret")
	expect(t, "reset with the token", a, http.StatusOK, "ok")
	if a.data(t)["user_id"] != alice.user {
		t.Fatalf("reset answered %s", a.Raw)
	}
	expect(t, "the token again", reset(token, "yet another secret"), http.StatusForbidden, "action_token_used")
	expect(t, "a made-up token", reset("at_nope", "yet another secret"), http.StatusForbidden, "action_token_invalid")
	expect(t, "alice's session after the reset", s.do(t, req{method: http.MethodGet, path: "/v1/im/users/me/presence", token: alice.token}),
		http.StatusUnauthorized, rest.ReasonTokenRevoked)
	expect(t, "the old password", s.loginAs(t, "alice", "correct horse", "x"), http.StatusUnauthorized, rest.ReasonInvalidCredentials)
	s.signIn(t, "alice", "a brand new secret", "after")
	expect(t, "bob after alice's reset", s.do(t, req{method: http.MethodGet, path: "/v1/im/users/me/presence", token: bob.token}), http.StatusOK, "ok")
	if n := s.count(t, "SELECT count(*) FROM events WHERE event_type = 'user.password_reset.v1' AND actor_id = $1", alice.user); n != 1 {
		t.Fatalf("%d password resets by alice", n)
	}
	for _, secret := range []string{"correct horse", "a brand new secret", alicePhone, token} {
		if n := s.count(t, "SELECT count(*) FROM events WHERE payload::text LIKE $1", "%"+secret+"%"); n != 0 {
			t.Errorf("%d events hold %q", n, secret)
		}
	}
}

// TestResetRefusesExpiredCodesAndTokensAndIsLimited: an expired code and an expired reset token
// are refused; the per-address limit refuses the requests over it before anything is spent.
func TestResetRefusesExpiredCodesAndTokensAndIsLimited(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{ResetTokenTTL: time.Second, ResetPerIP: 6}, stackOpts{reads: true, more: true, self: true, codeTTL: time.Second})
	const phone = "+8613800000003"
	code := s.sendCode(t, "register", phone)
	expect(t, "register with a phone", s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/register", body: fmt.Sprintf(
		`{"tenant":%q,"login":"carol","password":"correct horse","phone":%q,"code":%q}`, s.tenant, phone, code)}), http.StatusCreated, "ok")
	resetToken := func(code string) answer {
		return s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/password-reset/token",
			body: fmt.Sprintf(`{"tenant":%q,"login":"carol","phone":%q,"code":%q}`, s.tenant, phone, code)})
	}
	expired := s.sendCode(t, "reset_password", phone)
	time.Sleep(1100 * time.Millisecond)
	expect(t, "an expired code", resetToken(expired), http.StatusForbidden, "code_not_found") // 1
	a := resetToken(s.sendCode(t, "reset_password", phone))                                   // 2
	expect(t, "a fresh code", a, http.StatusCreated, "ok")
	token := a.data(t)["token"].(string)
	time.Sleep(1100 * time.Millisecond)
	reset := func(token string) answer {
		return s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/password-reset",
			body: fmt.Sprintf(`{"tenant":%q,"token":%q,"new_password":"a brand new secret"}`, s.tenant, token)})
	}
	expect(t, "an expired reset token", reset(token), http.StatusForbidden, "action_token_expired") // 3
	for i := 4; i <= 6; i++ {
		expect(t, "a made-up token", reset("at_nope"), http.StatusForbidden, "action_token_invalid")
	}
	events := s.events(t, "")
	expect(t, "the seventh reset request a minute", resetToken(s.sendCode(t, "reset_password", phone)), http.StatusTooManyRequests, rest.ReasonRateLimited)
	if n := s.events(t, ""); n != events {
		t.Fatalf("a limited reset wrote %d events", n-events)
	}
	expect(t, "carol's password", s.loginAs(t, "carol", "correct horse", "x"), http.StatusOK, "ok")
}

// TestDeleteAccountChecksThePasswordFirst: deleting the account asks for the password again; a
// wrong one erases nothing; the right one hands the account to the erasure.
func TestDeleteAccountChecksThePasswordFirst(t *testing.T) {
	t.Parallel()
	s := selfStack(t, rest.Config{}, stackOpts{})
	alice := s.signIn(t, "alice", "correct horse", "phone")
	del := func(password string) answer {
		return s.do(t, req{method: http.MethodPost, path: "/v1/im/account/delete", token: alice.token,
			body: fmt.Sprintf(`{"password":%q}`, password)})
	}
	expect(t, "delete with a wrong password", del("wrong horse"), http.StatusForbidden, "wrong_password")
	if got := s.self.erased.all(); len(got) != 0 {
		t.Fatalf("a refused deletion erased %v", got)
	}
	expect(t, "delete", del("correct horse"), http.StatusOK, "ok")
	if got := s.self.erased.all(); len(got) != 1 || got[0].String() != alice.user {
		t.Fatalf("erased %v, want alice %s", got, alice.user)
	}
}
