package rest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/rest"
)

// user registers and logs in through the API and returns its id and token.
func (s *stack) user(t *testing.T, login string) (string, string) {
	t.Helper()
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/register",
		body: `{"tenant":"` + s.tenant.String() + `","login":"` + login + `","password":"password-` + login + `"}`})
	expect(t, "register "+login, a, http.StatusCreated, "ok")
	a = s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login",
		body: `{"tenant":"` + s.tenant.String() + `","login":"` + login + `","password":"password-` + login + `"}`})
	expect(t, "login "+login, a, http.StatusOK, "ok")
	d := a.data(t)
	return d["user_id"].(string), d["token"].(string)
}

func TestRegisterLoginSendHistory(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true})
	aliceID, alice := s.user(t, "alice")
	bobID, bob := s.user(t, "bob")
	lo, hi := aliceID, bobID
	if len(lo) > len(hi) || (len(lo) == len(hi) && lo > hi) {
		lo, hi = hi, lo
	}
	topic := "p2p" + lo + "_" + hi

	for i, text := range []string{"hi bob", "are you there?"} {
		a := s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/" + topic + "/messages", token: alice, key: "send-" + string(rune('1'+i)),
			body: `{"client_msg_id":"m` + string(rune('1'+i)) + `","content":"` + text + `"}`})
		expect(t, "send", a, http.StatusCreated, "ok")
	}
	s.project(t)

	a := s.do(t, req{method: http.MethodGet, path: "/v1/im/topics/" + topic + "/messages?after_seq=0&limit=10", token: bob})
	expect(t, "history", a, http.StatusOK, "ok")
	var page struct {
		Topic    string `json:"topic"`
		LastSeq  string `json:"last_seq"`
		Messages []struct {
			Seq     string          `json:"seq"`
			From    string          `json:"from"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(a.Body.Data, &page); err != nil {
		t.Fatal(err)
	}
	if page.Topic != topic || page.LastSeq != "2" || len(page.Messages) != 2 || page.Messages[0].Seq != "1" ||
		page.Messages[0].From != aliceID || string(page.Messages[1].Content) != `"are you there?"` {
		t.Fatalf("history %s", a.Raw)
	}
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/topics/" + topic + "/messages?before_seq=2", token: alice})
	expect(t, "scroll back", a, http.StatusOK, "ok")
	if !strings.Contains(a.Raw, `"hi bob"`) || strings.Contains(a.Raw, "are you there") {
		t.Fatalf("before_seq=2: %s", a.Raw)
	}
	_, eve := s.user(t, "eve")
	expect(t, "a third user reads the 1:1 topic", s.do(t, req{method: http.MethodGet, path: "/v1/im/topics/" + topic + "/messages", token: eve}),
		http.StatusForbidden, rest.ReasonNotParty)
	expect(t, "bad seq", s.do(t, req{method: http.MethodGet, path: "/v1/im/topics/" + topic + "/messages?after_seq=x", token: bob}),
		http.StatusBadRequest, rest.ReasonInvalid)

	// Read marks and unread counts.
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/topics/" + topic + "/unread", token: bob})
	expect(t, "topic unread", a, http.StatusOK, "ok")
	if a.data(t)["unread"] != "2" {
		t.Fatalf("bob's unread before reading: %s", a.Raw)
	}
	a = s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/" + topic + "/read", token: bob, key: "read-1", body: `{"read_seq":"2"}`})
	expect(t, "mark read", a, http.StatusOK, "ok")
	if d := a.data(t); d["read_seq"] != "2" || d["recv_seq"] != "2" || d["changed"] != true {
		t.Fatalf("mark read: %s", a.Raw)
	}
	s.project(t)
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/unread", token: bob})
	expect(t, "unread", a, http.StatusOK, "ok")
	if d := a.data(t); d["total"] != "0" || d["topics"].(map[string]any)[topic] != "0" {
		t.Fatalf("bob's unread after reading: %s", a.Raw)
	}

	// Edit, recall and delete-for-me.
	msg := "/v1/im/topics/" + topic + "/messages/1"
	expect(t, "bob edits alice's message", s.do(t, req{method: http.MethodPatch, path: msg, token: bob, key: "e0", body: `{"version":"1","content":"x"}`}),
		http.StatusForbidden, "not_sender")
	a = s.do(t, req{method: http.MethodPatch, path: msg, token: alice, key: "e1", body: `{"version":"1","content":"hi Bob"}`})
	expect(t, "edit", a, http.StatusOK, "ok")
	if a.data(t)["version"] != "2" {
		t.Fatalf("edit: %s", a.Raw)
	}
	expect(t, "stale edit", s.do(t, req{method: http.MethodPatch, path: msg, token: alice, key: "e2", body: `{"version":"1","content":"again"}`}),
		http.StatusConflict, rest.ReasonConflict)
	expect(t, "recall", s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/" + topic + "/messages/2/recall", token: alice, key: "r1"}),
		http.StatusOK, "ok")
	expect(t, "delete for bob", s.do(t, req{method: http.MethodDelete, path: msg, token: bob, key: "d1"}), http.StatusOK, "ok")
	expect(t, "recall an unknown seq", s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/" + topic + "/messages/9/recall", token: alice, key: "r9"}),
		http.StatusNotFound, rest.ReasonNotFound)
	s.project(t)
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/topics/" + topic + "/messages", token: bob})
	if strings.Contains(a.Raw, "hi Bob") || strings.Contains(a.Raw, "are you there") || !strings.Contains(a.Raw, `"recalled"`) {
		t.Fatalf("bob's history after delete and recall: %s", a.Raw)
	}
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/topics/" + topic + "/messages", token: alice})
	if !strings.Contains(a.Raw, `"hi Bob"`) {
		t.Fatalf("alice's history after the edit: %s", a.Raw)
	}
}

func TestGroupsRelationsAndProfiles(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true})
	ownerID, owner := s.user(t, "owner")
	memberID, member := s.user(t, "member")
	_, outsider := s.user(t, "outsider")

	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/groups", token: owner, key: "g1",
		body: `{"name":"Design","intro":"pixels","settings":{"join_approval":false,"who_may_invite":"member","who_may_announce":"admin","mute_all":false}}`})
	expect(t, "create group", a, http.StatusCreated, "ok")
	gid := a.data(t)["group_id"].(string)
	if a.data(t)["topic"] != "grp"+gid {
		t.Fatalf("create: %s", a.Raw)
	}
	g := "/v1/im/groups/" + gid
	expect(t, "join", s.do(t, req{method: http.MethodPost, path: g + "/join", token: member, key: "j1"}), http.StatusOK, "ok")
	expect(t, "join twice", s.do(t, req{method: http.MethodPost, path: g + "/join", token: member, key: "j2"}), http.StatusForbidden, "already_member")
	expect(t, "member sets the announcement", s.do(t, req{method: http.MethodPut, path: g + "/announcement", token: member, key: "a1", body: `{"text":"hi"}`}),
		http.StatusForbidden, "not_admin")
	expect(t, "promote", s.do(t, req{method: http.MethodPut, path: g + "/members/" + memberID + "/role", token: owner, key: "p1", body: `{"role":"admin"}`}),
		http.StatusOK, "ok")
	expect(t, "mute in the past", s.do(t, req{method: http.MethodPut, path: g + "/members/" + memberID + "/mute", token: owner, key: "m1", body: `{"until":"2001-01-01T00:00:00Z"}`}),
		http.StatusBadRequest, rest.ReasonInvalid)
	expect(t, "unknown group", s.do(t, req{method: http.MethodPost, path: "/v1/im/groups/999/join", token: member, key: "j3"}), http.StatusNotFound, rest.ReasonNotFound)
	expect(t, "send to the group", s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp" + gid + "/messages", token: member, key: "s1",
		body: `{"client_msg_id":"c1","content":"hello"}`}), http.StatusCreated, "ok")
	s.project(t)

	a = s.do(t, req{method: http.MethodGet, path: g, token: outsider})
	expect(t, "get group", a, http.StatusOK, "ok")
	if d := a.data(t); d["name"] != "Design" || d["owner"] != ownerID || d["member_count"] != float64(2) {
		t.Fatalf("group: %s", a.Raw)
	}
	a = s.do(t, req{method: http.MethodGet, path: g + "/members?limit=1", token: member})
	expect(t, "members page 1", a, http.StatusOK, "ok")
	next, _ := a.data(t)["next_cursor"].(string)
	if next == "" || !strings.Contains(a.Raw, ownerID) {
		t.Fatalf("members page 1: %s", a.Raw)
	}
	a = s.do(t, req{method: http.MethodGet, path: g + "/members?limit=1&cursor=" + next, token: member})
	if !strings.Contains(a.Raw, memberID) || !strings.Contains(a.Raw, `"admin"`) {
		t.Fatalf("members page 2: %s", a.Raw)
	}
	expect(t, "an outsider lists members", s.do(t, req{method: http.MethodGet, path: g + "/members", token: outsider}), http.StatusForbidden, rest.ReasonNotMember)
	expect(t, "an outsider reads history", s.do(t, req{method: http.MethodGet, path: "/v1/im/topics/grp" + gid + "/messages", token: outsider}),
		http.StatusForbidden, rest.ReasonNotMember)
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/groups", token: member})
	if !strings.Contains(a.Raw, `"`+gid+`"`) {
		t.Fatalf("my groups: %s", a.Raw)
	}

	// Friends and blocks.
	expect(t, "friend request", s.do(t, req{method: http.MethodPost, path: "/v1/im/friends/requests", token: owner, key: "f1",
		body: `{"user_id":"` + memberID + `","message":"hi"}`}), http.StatusOK, "ok")
	ownerIDNum, _ := domain.ParseUserID(ownerID)
	expect(t, "accept", s.do(t, req{method: http.MethodPost, path: "/v1/im/friends/requests/" + ownerIDNum.String() + "/accept", token: member, key: "f2"}),
		http.StatusOK, "ok")
	expect(t, "block", s.do(t, req{method: http.MethodPost, path: "/v1/im/blocks", token: owner, key: "b1", body: `{"user_id":"` + memberID + `"}`}),
		http.StatusOK, "ok")
	expect(t, "self friendship", s.do(t, req{method: http.MethodPost, path: "/v1/im/friends/requests", token: owner, key: "f3",
		body: `{"user_id":"` + ownerID + `"}`}), http.StatusBadRequest, rest.ReasonInvalid)
	s.project(t)
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/blocks", token: owner})
	if !strings.Contains(a.Raw, memberID) {
		t.Fatalf("blocks: %s", a.Raw)
	}
	expect(t, "unblock", s.do(t, req{method: http.MethodDelete, path: "/v1/im/blocks/" + memberID, token: owner, key: "b2"}), http.StatusOK, "ok")
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/friends", token: member})
	expect(t, "friends", a, http.StatusOK, "ok")

	// Profiles: registration wrote the first one (the login as nickname).
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/users/" + memberID, token: outsider})
	expect(t, "get profile", a, http.StatusOK, "ok")
	if a.data(t)["nickname"] != "member" {
		t.Fatalf("profile: %s", a.Raw)
	}
	expect(t, "unknown user", s.do(t, req{method: http.MethodGet, path: "/v1/im/users/12345", token: outsider}), http.StatusNotFound, rest.ReasonNotFound)
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/users/" + memberID + "/presence", token: owner})
	expect(t, "presence", a, http.StatusOK, "ok")
	if d := a.data(t); d["status"] != "offline" || d["online"] != false {
		t.Fatalf("presence: %s", a.Raw)
	}
	expect(t, "dissolve by a member", s.do(t, req{method: http.MethodDelete, path: g, token: member, key: "x1"}), http.StatusForbidden, "not_owner")
	expect(t, "dissolve", s.do(t, req{method: http.MethodDelete, path: g, token: owner, key: "x2"}), http.StatusOK, "ok")
}

func TestUpdateProfile(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true})
	tok := s.token(t, s.tenant, 77) // a user without a registration stream
	a := s.do(t, req{method: http.MethodPatch, path: "/v1/im/users/me", token: tok, key: "p1", body: `{"nickname":"Neo","signature":"knock knock"}`})
	expect(t, "set profile", a, http.StatusOK, "ok")
	s.project(t)
	a = s.do(t, req{method: http.MethodPatch, path: "/v1/im/users/me", token: tok, key: "p2", body: `{"avatar":"https://cdn.example/neo.png"}`})
	expect(t, "patch avatar", a, http.StatusOK, "ok")
	s.project(t)
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/users/me", token: tok})
	if d := a.data(t); d["nickname"] != "Neo" || d["signature"] != "knock knock" || d["avatar"] != "https://cdn.example/neo.png" {
		t.Fatalf("profile after patches: %s", a.Raw)
	}
	a = s.do(t, req{method: http.MethodPatch, path: "/v1/im/users/me", token: tok, key: "p3", body: `{"nickname":""}`})
	expect(t, "empty nickname", a, http.StatusBadRequest, rest.ReasonInvalid)
}
