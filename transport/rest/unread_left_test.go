package rest_test

import (
	"net/http"
	"testing"

	"github.com/imledger/imledger/transport/rest"
)

// TestUnreadTotalLeavesOutGroupsLeft: a group the caller left keeps receiving messages, which the
// caller may no longer read or mark read; they must not count in the caller's unread total.
func TestUnreadTotalLeavesOutGroupsLeft(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true})
	_, owner := s.user(t, "owner")
	_, member := s.user(t, "member")
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/groups", token: owner, key: "g1",
		body: `{"name":"Left","settings":{"join_approval":false,"who_may_invite":"member","who_may_announce":"admin","mute_all":false}}`})
	expect(t, "create group", a, http.StatusCreated, "ok")
	gid := a.data(t)["group_id"].(string)
	topic := "/v1/im/topics/grp" + gid + "/messages"
	expect(t, "join", s.do(t, req{method: http.MethodPost, path: "/v1/im/groups/" + gid + "/join", token: member, key: "j1"}), http.StatusOK, "ok")
	expect(t, "member sends", s.do(t, req{method: http.MethodPost, path: topic, token: member, key: "s1",
		body: `{"client_msg_id":"c1","content":"hello"}`}), http.StatusCreated, "ok")
	expect(t, "owner sends", s.do(t, req{method: http.MethodPost, path: topic, token: owner, key: "s2",
		body: `{"client_msg_id":"c2","content":"one"}`}), http.StatusCreated, "ok")
	s.project(t)
	unread := func(what string) map[string]any {
		a := s.do(t, req{method: http.MethodGet, path: "/v1/im/unread", token: member})
		expect(t, what, a, http.StatusOK, "ok")
		return a.data(t)
	}
	if d := unread("unread as a member"); d["total"] != "1" {
		t.Fatalf("unread as a member: %v, want total 1", d)
	}
	expect(t, "leave", s.do(t, req{method: http.MethodPost, path: "/v1/im/groups/" + gid + "/leave", token: member, key: "l1"}), http.StatusOK, "ok")
	expect(t, "owner sends after the leave", s.do(t, req{method: http.MethodPost, path: topic, token: owner, key: "s3",
		body: `{"client_msg_id":"c3","content":"two"}`}), http.StatusCreated, "ok")
	s.project(t)
	if d := unread("unread after leaving"); d["total"] != "0" || len(d["topics"].(map[string]any)) != 0 {
		t.Fatalf("unread after leaving the group: %v, want total 0 and no topics", d)
	}
}
