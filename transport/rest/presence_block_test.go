package rest_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/rest"
)

// registerAndLogin registers login and returns a token and the user id.
func (s *stack) registerAndLogin(t *testing.T, login string) (token, id string) {
	t.Helper()
	s.registerUser(t, login, "correct horse")
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login",
		body: fmt.Sprintf(`{"tenant":%q,"login":%q,"password":"correct horse"}`, s.tenant.String(), login)})
	expect(t, "login "+login, a, http.StatusOK, "ok")
	d := a.data(t)
	return d["token"].(string), d["user_id"].(string)
}

// TestBlockedUserCannotReadThePresenceOfTheBlocker: relations decide who sees presence. A user
// the peer blocks is refused the peer's presence (403 blocked) from the moment the block
// command answers; others, and the blocker, still read it; an unblock gives it back.
func TestBlockedUserCannotReadThePresenceOfTheBlocker(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{})
	alice, aliceID := s.registerAndLogin(t, "alice")
	bob, bobID := s.registerAndLogin(t, "bob")
	carol, _ := s.registerAndLogin(t, "carol")
	presence := func(token, of string) answer {
		return s.do(t, req{method: http.MethodGet, path: "/v1/im/users/" + of + "/presence", token: token})
	}
	expect(t, "bob reads alice before the block", presence(bob, aliceID), http.StatusOK, "ok")
	expect(t, "alice blocks bob", s.do(t, req{method: http.MethodPost, path: "/v1/im/blocks", token: alice, key: "b1",
		body: `{"user_id":"` + bobID + `"}`}), http.StatusOK, "ok")
	a := presence(bob, aliceID)
	expect(t, "bob reads alice after the block", a, http.StatusForbidden, domain.ReasonBlocked)
	if a.Body.Data != nil && string(a.Body.Data) != "null" {
		t.Errorf("a refused presence read carries data: %s", a.Raw)
	}
	expect(t, "carol reads alice", presence(carol, aliceID), http.StatusOK, "ok")
	expect(t, "alice reads bob", presence(alice, bobID), http.StatusOK, "ok")
	expect(t, "bob reads himself", presence(bob, "me"), http.StatusOK, "ok")
	expect(t, "alice unblocks bob", s.do(t, req{method: http.MethodDelete, path: "/v1/im/blocks/" + bobID, token: alice, key: "b2"}),
		http.StatusOK, "ok")
	expect(t, "bob reads alice after the unblock", presence(bob, aliceID), http.StatusOK, "ok")
}
