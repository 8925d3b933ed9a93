package rest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/rest"
)

// searchIDs runs a user search and returns the ids found and the next cursor.
func searchIDs(t *testing.T, s *stack, tok, query string) ([]string, string) {
	t.Helper()
	a := s.do(t, req{method: http.MethodGet, path: "/v1/im/search/users?" + query, token: tok})
	expect(t, "search "+query, a, http.StatusOK, "ok")
	var page rest.UserSearchPage
	if err := json.Unmarshal(a.Body.Data, &page); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, u := range page.Users {
		ids = append(ids, u.UserID)
	}
	return ids, page.NextCursor
}

// TestSearchEndpoints drives user search, group search and the batch profile read over HTTP:
// the prefix by nickname (any case) and by login, the opt-out through PATCH /v1/im/users/me, a
// blocker hidden from the user it blocks, paging by cursor, discoverable groups (and a settings
// replacement that leaves discoverable out keeping it), the profiles of many users in one call,
// and the refusals of bad input.
func TestSearchEndpoints(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true})
	const me, ann, anna, andy, zed domain.UserID = 501, 502, 503, 504, 505
	storetest.RegisterUsers(t, s.store, s.tenant, me, ann, anna, andy, zed)
	tok := map[domain.UserID]string{}
	for u, nick := range map[domain.UserID]string{me: "Me", ann: "Ann", anna: "anna", andy: "ANDY", zed: "Zed"} {
		tok[u] = s.token(t, s.tenant, u)
		a := s.do(t, req{method: http.MethodPatch, path: "/v1/im/users/me", token: tok[u], key: "nick-" + u.String(),
			body: fmt.Sprintf(`{"nickname":%q}`, nick)})
		expect(t, "nickname", a, http.StatusOK, "ok")
	}
	expect(t, "andy opts out", s.do(t, req{method: http.MethodPatch, path: "/v1/im/users/me", token: tok[andy], key: "out",
		body: `{"discoverable":false}`}), http.StatusOK, "ok")
	expect(t, "anna blocks me", s.do(t, req{method: http.MethodPost, path: "/v1/im/blocks", token: tok[anna], key: "blk",
		body: fmt.Sprintf(`{"user_id":%q}`, me.String())}), http.StatusOK, "ok")
	s.project(t)

	if ids, _ := searchIDs(t, s, tok[me], "q=AN"); !slices.Equal(ids, []string{"502"}) {
		t.Errorf("me searches an: %v, want ann alone (anna blocks me, andy opted out)", ids)
	}
	if ids, _ := searchIDs(t, s, tok[zed], "q=an"); !slices.Equal(ids, []string{"502", "503"}) {
		t.Errorf("zed searches an: %v, want ann and anna", ids)
	}
	if ids, _ := searchIDs(t, s, tok[zed], "by=login&q=USER50"); len(ids) != 4 {
		t.Errorf("zed searches logins user50: %v, want the four discoverable users", ids)
	}
	first, next := searchIDs(t, s, tok[zed], "by=login&q=user50&limit=3")
	rest2, last := searchIDs(t, s, tok[zed], "by=login&q=user50&limit=3&cursor="+next)
	if len(first) != 3 || next == "" || len(rest2) != 1 || last != "" || slices.Contains(first, rest2[0]) {
		t.Errorf("paged logins: %v then %v (cursor %q, then %q)", first, rest2, next, last)
	}
	for _, c := range []struct{ query, field string }{
		{"", "q"}, {"q=a&by=email", "by"}, {"q=a&cursor=nope", "cursor"}, {"q=" + strings.Repeat("a", 65), "q"},
	} {
		a := s.do(t, req{method: http.MethodGet, path: "/v1/im/search/users?" + c.query, token: tok[me]})
		if a.Status != http.StatusBadRequest || a.Body.Details["field"] != c.field {
			t.Errorf("search %q: %d %s, want 400 naming %s", c.query, a.Status, a.Raw, c.field)
		}
	}

	// Groups: found by name once their settings make them discoverable.
	create := func(key, name, settings string) string {
		a := s.do(t, req{method: http.MethodPost, path: "/v1/im/groups", token: tok[me], key: key,
			body: fmt.Sprintf(`{"name":%q%s}`, name, settings)})
		expect(t, "create "+name, a, http.StatusCreated, "ok")
		return a.data(t)["group_id"].(string)
	}
	open := create("g1", "Hikers", `,"settings":{"join_approval":false,"who_may_invite":"member","who_may_announce":"admin","mute_all":false,"discoverable":true}`)
	hidden := create("g2", "Hiking club", "")
	expect(t, "replace settings without discoverable", s.do(t, req{method: http.MethodPut, path: "/v1/im/groups/" + open + "/settings",
		token: tok[me], key: "g1s", body: `{"join_approval":true,"who_may_invite":"admin","who_may_announce":"admin","mute_all":false}`}), http.StatusOK, "ok")
	s.project(t)
	a := s.do(t, req{method: http.MethodGet, path: "/v1/im/search/groups?q=hik", token: tok[zed]})
	expect(t, "group search", a, http.StatusOK, "ok")
	var groups rest.GroupSearchPage
	if err := json.Unmarshal(a.Body.Data, &groups); err != nil {
		t.Fatal(err)
	}
	if len(groups.Groups) != 1 || groups.Groups[0].GroupID != open || !groups.Groups[0].JoinApproval || groups.Groups[0].Topic != "grp"+open {
		t.Errorf("groups found %s, want %s alone (with join approval; %s is not discoverable)", a.Body.Data, open, hidden)
	}
	g := s.do(t, req{method: http.MethodGet, path: "/v1/im/groups/" + open, token: tok[zed]})
	if settings, _ := g.data(t)["settings"].(map[string]any); settings["discoverable"] != true {
		t.Errorf("group read: %s", g.Raw)
	}

	// Many profiles at once, in the order asked.
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/users?ids=505,999,502,505", token: tok[me]})
	expect(t, "batch profiles", a, http.StatusOK, "ok")
	var list rest.ProfileList
	if err := json.Unmarshal(a.Body.Data, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Users) != 2 || list.Users[0].Nickname != "Zed" || list.Users[1].Nickname != "Ann" {
		t.Errorf("batch profiles: %s", a.Body.Data)
	}
	many := strings.TrimSuffix(strings.Repeat("1,", 101), ",")
	for _, q := range []string{"", "ids=x", "ids=" + many} {
		if a := s.do(t, req{method: http.MethodGet, path: "/v1/im/users?" + q, token: tok[me]}); a.Status != http.StatusBadRequest {
			t.Errorf("batch profiles %q: %d %s", q, a.Status, a.Raw)
		}
	}
}

// TestGroupRequestsEndpoint lists an invitation to the caller and a join request to a group the
// caller owns, each with its direction, over HTTP.
func TestGroupRequestsEndpoint(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true})
	const owner, guest, asker domain.UserID = 601, 602, 603
	storetest.RegisterUsers(t, s.store, s.tenant, owner, guest, asker)
	tok := func(u domain.UserID) string { return s.token(t, s.tenant, u) }
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/groups", token: tok(owner), key: "g",
		body: `{"name":"Club","settings":{"join_approval":true,"who_may_invite":"member","who_may_announce":"admin","mute_all":false}}`})
	expect(t, "create", a, http.StatusCreated, "ok")
	gid := a.data(t)["group_id"].(string)
	expect(t, "invite", s.do(t, req{method: http.MethodPost, path: "/v1/im/groups/" + gid + "/invites", token: tok(owner), key: "i",
		body: fmt.Sprintf(`{"user_id":%q}`, guest.String())}), http.StatusOK, "ok")
	expect(t, "request", s.do(t, req{method: http.MethodPost, path: "/v1/im/groups/" + gid + "/join-requests", token: tok(asker), key: "r",
		body: `{"message":"hi"}`}), http.StatusOK, "ok")
	s.project(t)
	list := func(u domain.UserID) []rest.GroupRequestEntry {
		a := s.do(t, req{method: http.MethodGet, path: "/v1/im/groups/requests", token: tok(u)})
		expect(t, "list", a, http.StatusOK, "ok")
		var l rest.GroupRequestList
		if err := json.Unmarshal(a.Body.Data, &l); err != nil {
			t.Fatal(err)
		}
		return l.Requests
	}
	if got := list(guest); len(got) != 1 || got[0].Kind != "invitation" || got[0].Direction != "incoming" || got[0].By != owner.String() || got[0].Name != "Club" {
		t.Errorf("the invitee's list: %+v", got)
	}
	if got := list(owner); len(got) != 1 || got[0].Kind != "join_request" || got[0].Direction != "incoming" || got[0].UserID != asker.String() || got[0].Message != "hi" {
		t.Errorf("the owner's list: %+v", got)
	}
	if got := list(asker); len(got) != 1 || got[0].Direction != "outgoing" || got[0].GroupID != gid {
		t.Errorf("the asker's list: %+v", got)
	}
}
