package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/imledger/imledger/internal/testenv"
)

// loginOn logs u's login name in through base with device and returns the session's user (its
// token) and id.
func loginOn(t *testing.T, base, login, password, device string) (user, string) {
	t.Helper()
	a := call(t, http.MethodPost, base+"/v1/im/auth/login", "", "",
		fmt.Sprintf(`{"tenant":"demo","login":%q,"password":%q,"device":%q}`, login, password, device))
	token, _ := a.Data["token"].(string)
	id, _ := a.Data["user_id"].(string)
	sid, _ := a.Data["session_id"].(string)
	if a.status != http.StatusOK || token == "" || sid == "" {
		t.Fatalf("login %s on %s: %d %s", login, device, a.status, a.raw)
	}
	return user{id: id, token: token}, sid
}

// TestRevocationsReachEveryNodeWithinASecond runs two serve processes. A session signed out
// through node B is refused by node A's REST at once and its WebSocket connections on both nodes
// are closed with session_revoked within a second; the user's other session goes on. A password
// change through node A keeps its own session and ends the other one everywhere (token_revoked);
// logout everywhere ends the last. The session list shows what is left, and the login-sessions
// read model matches a rebuild from the log.
func TestRevocationsReachEveryNodeWithinASecond(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, testenv.Kafka(t), true)
	a, b := env.start(t, "acct-a"), env.start(t, "acct-b")
	signUp(t, a.base, "alice")
	phone, phoneID := loginOn(t, a.base, "alice", "correct horse battery", "phone")
	laptop, laptopID := loginOn(t, b.base, "alice", "correct horse battery", "laptop")
	tablet, _ := loginOn(t, b.base, "alice", "correct horse battery", "tablet")
	phoneA, phoneB := dialWS(t, a.base, phone, "phone@a"), dialWS(t, b.base, phone, "phone@b")
	laptopA, tabletA := dialWS(t, a.base, laptop, "laptop@a"), dialWS(t, a.base, tablet, "tablet@a")
	presence := func(base string, u user) answer {
		return call(t, http.MethodGet, base+"/v1/im/users/me/presence", u.token, "", "")
	}

	start := time.Now()
	if r := call(t, http.MethodDelete, b.base+"/v1/im/account/sessions/"+phoneID, laptop.token, "out-phone", ""); r.status != http.StatusOK {
		t.Fatalf("sign the phone out through node b: %d %s", r.status, r.raw)
	}
	refusedWithin(t, time.Second, "node a, the phone's token", func() answer { return presence(a.base, phone) }, "session_revoked")
	phoneA.endedWith("session_revoked", time.Second)
	phoneB.endedWith("session_revoked", time.Second)
	t.Logf("the phone's connections on both nodes closed %s after the sign-out", time.Since(start).Round(time.Millisecond))
	for _, c := range []*wsClient{laptopA, tabletA} {
		c.write(`{"ping":{"id":"p"}}`)
		if r := c.ctrl("p"); r.Code != http.StatusOK {
			t.Fatalf("%s after the phone's sign-out: %+v", c.name, r)
		}
	}

	// The laptop changes the password through node a: the tablet ends everywhere, the laptop stays.
	start = time.Now()
	if r := call(t, http.MethodPut, a.base+"/v1/im/account/password", laptop.token, "",
		`{"old_password":"correct horse battery","new_password":"battery staple horse"}`); r.status != http.StatusOK {
		t.Fatalf("change the password: %d %s", r.status, r.raw)
	}
	tabletA.endedWith("token_revoked", time.Second)
	t.Logf("the tablet's connection closed %s after the password change", time.Since(start).Round(time.Millisecond))
	refusedWithin(t, time.Second, "node b, the tablet's token", func() answer { return presence(b.base, tablet) }, "token_revoked")
	if r := presence(b.base, laptop); r.status != http.StatusOK {
		t.Fatalf("node b answers the changing session: %d %s", r.status, r.raw)
	}

	// The list, through node b once projected, holds the laptop alone, marked current.
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := call(t, http.MethodGet, b.base+"/v1/im/account/sessions", laptop.token, "", "")
		list, _ := r.Data["sessions"].([]any)
		if len(list) == 1 && list[0].(map[string]any)["session_id"] == laptopID && list[0].(map[string]any)["current"] == true {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session list never became the laptop alone: %d %s", r.status, r.raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	verifyEventually(t, a.file, "login-sessions")

	start = time.Now()
	if r := call(t, http.MethodPost, b.base+"/v1/im/account/logout-everywhere", laptop.token, "everywhere", ""); r.status != http.StatusOK {
		t.Fatalf("logout everywhere: %d %s", r.status, r.raw)
	}
	laptopA.endedWith("token_revoked", time.Second)
	t.Logf("the laptop's connection closed %s after logout everywhere", time.Since(start).Round(time.Millisecond))
	refusedWithin(t, time.Second, "node a, the laptop's token", func() answer { return presence(a.base, laptop) }, "token_revoked")
	if _, sid := loginOn(t, a.base, "alice", "battery staple horse", "new"); sid == "" {
		t.Fatal("no login after logout everywhere")
	}
}

// refusedWithin polls ask until it answers 401 reason, failing the test when that takes longer
// than within.
func refusedWithin(t *testing.T, within time.Duration, what string, ask func() answer, reason string) {
	t.Helper()
	start := time.Now()
	for {
		r := ask()
		if r.status == http.StatusUnauthorized && r.Reason == reason {
			t.Logf("%s refused (%s) %s after the change", what, reason, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > within {
			t.Fatalf("%s: %d %s %s after the change, want 401 %s", what, r.status, r.raw, within, reason)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
