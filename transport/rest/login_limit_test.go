package rest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/imledger/imledger/transport/rest"
)

// loginFrom posts a login from the loopback address ip (the whole of 127.0.0.0/8 reaches the
// test server), so the server sees it as a client of its own.
func (s *stack) loginFrom(t *testing.T, ip, login, password string) (int, string) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	defer c.CloseIdleConnections()
	body := fmt.Sprintf(`{"tenant":%q,"login":%q,"password":%q}`, s.tenant.String(), login, password)
	r, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, s.srv.URL+"/v1/im/auth/login", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env struct{ Reason string }
	_ = json.Unmarshal(raw, &env)
	return resp.StatusCode, env.Reason
}

func (s *stack) registerUser(t *testing.T, login, password string) {
	t.Helper()
	body := fmt.Sprintf(`{"tenant":%q,"login":%q,"password":%q}`, s.tenant.String(), login, password)
	expect(t, "register "+login, s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/register", body: body}), http.StatusCreated, "ok")
}

// TestWrongPasswordsFromElsewhereDoNotLockOutTheOwner: with the default limits, ten and more
// wrong passwords for a login from one address slow that address down and leave the owner, at
// another address, logging in.
func TestWrongPasswordsFromElsewhereDoNotLockOutTheOwner(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{})
	s.registerUser(t, "alice", "correct horse")
	limited := 0
	for range 12 {
		code, reason := s.loginFrom(t, "127.0.0.20", "alice", "wrong guess")
		switch {
		case code == http.StatusTooManyRequests && reason == rest.ReasonRateLimited:
			limited++
		case code != http.StatusUnauthorized:
			t.Fatalf("wrong password: %d %s", code, reason)
		}
	}
	if limited == 0 {
		t.Fatal("12 wrong passwords a minute from one address were never limited")
	}
	if code, reason := s.loginFrom(t, "127.0.0.10", "alice", "correct horse"); code != http.StatusOK {
		t.Fatalf("the owner, at another address, after the guesses: %d %s", code, reason)
	}
}

// TestGuessingFromManyAddressesIsBoundedButTheOwnerGetsIn: guesses spread over many addresses hit
// the per-name limit; an address the owner logged in from before is exempt from it, a new one
// is not.
func TestGuessingFromManyAddressesIsBoundedButTheOwnerGetsIn(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{LoginPerName: 5}, stackOpts{})
	s.registerUser(t, "bob", "correct horse")
	if code, reason := s.loginFrom(t, "127.0.0.10", "bob", "correct horse"); code != http.StatusOK {
		t.Fatalf("first login: %d %s", code, reason)
	}
	limited := 0
	for i := range 8 {
		code, reason := s.loginFrom(t, fmt.Sprintf("127.0.1.%d", i+1), "bob", "wrong guess")
		if code == http.StatusTooManyRequests && reason == rest.ReasonRateLimited {
			limited++
		} else if code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d %s", i, code, reason)
		}
	}
	if limited == 0 {
		t.Fatal("8 guesses from 8 addresses were never limited by the per-name limit of 5")
	}
	if code, reason := s.loginFrom(t, "127.0.0.10", "bob", "correct horse"); code != http.StatusOK {
		t.Fatalf("the owner at the address they logged in from: %d %s", code, reason)
	}
	if code, reason := s.loginFrom(t, "127.0.2.1", "bob", "correct horse"); code != http.StatusTooManyRequests || reason != rest.ReasonRateLimited {
		t.Fatalf("a new address during the attack: %d %s, want 429", code, reason)
	}
	// Another login name is not affected.
	if code, reason := s.loginFrom(t, "127.0.2.1", "carol", "whatever"); code != http.StatusUnauthorized {
		t.Fatalf("another login name: %d %s", code, reason)
	}
}
