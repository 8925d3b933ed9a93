package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// acmeUser registers login in tenant acme and logs in.
func acmeUser(t *testing.T, base, login string) user {
	t.Helper()
	body := fmt.Sprintf(`{"tenant":"acme","login":%q,"password":"correct horse battery"}`, login)
	if a := call(t, http.MethodPost, base+"/v1/im/auth/register", "", "", body); a.status != http.StatusCreated {
		t.Fatalf("register %s: %d %s", login, a.status, a.raw)
	}
	a := call(t, http.MethodPost, base+"/v1/im/auth/login", "", "", body)
	token, _ := a.Data["token"].(string)
	id, _ := a.Data["user_id"].(string)
	if a.status != http.StatusOK || token == "" {
		t.Fatalf("login %s: %d %s", login, a.status, a.raw)
	}
	return user{id: id, token: token}
}

// messageEvents counts tenant's message events in the event store.
func messageEvents(t *testing.T, dbURL, tenant string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM events WHERE tenant_id = $1 AND event_type LIKE 'message.%'`, tenant).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRateLimitedSendsWriteNothing: a tenant's rate_limits setting lowers the node's limits. A
// sender over its send limit is answered REST 429 rate_limited with Retry-After and WebSocket ctrl
// 429 rate_limited, and the event store holds no message event for the refused sends; another
// sender of the same tenant and the other tenants are not touched. Group creation has its own
// per-user limit.
func TestRateLimitedSendsWriteNothing(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, nil, true)
	s := env.start(t, "rl")
	if out, errOut, err := runCLI(t, "tenant", "create", "acme", "--no-api-key", "--config", s.file,
		"--settings", `{"rate_limits":{"send_user":3,"group_create_user":1,"friend_request_user":1}}`); err != nil {
		t.Fatalf("tenant create: %v\n%s\n%s", err, out, errOut)
	}
	alice, bob := acmeUser(t, s.base, "alice"), acmeUser(t, s.base, "bob")
	gid := createGroup(t, s.base, alice, "limited")
	a := call(t, http.MethodPost, s.base+"/v1/im/groups", alice.token, "create-second", `{"name":"second"}`)
	if a.status != http.StatusTooManyRequests || a.Reason != "rate_limited" || a.header.Get("Retry-After") == "" {
		t.Fatalf("second group within the minute: %d %s (Retry-After %q), want 429 rate_limited", a.status, a.raw, a.header.Get("Retry-After"))
	}
	joinGroup(t, s.base, bob, gid)
	topic := "grp" + gid

	for i := range 3 {
		if a := sendREST(t, s.base, alice, topic, "ok-"+strconv.Itoa(i), `{"text":"hi"}`); a.status/100 != 2 {
			t.Fatalf("send %d: %d %s", i, a.status, a.raw)
		}
	}
	before := messageEvents(t, env.dbURL, "acme")
	if before != 3 {
		t.Fatalf("message events after 3 sends: %d", before)
	}
	a = sendREST(t, s.base, alice, topic, "over-rest", `{"text":"too many"}`)
	retry, _ := strconv.Atoi(a.header.Get("Retry-After"))
	if a.status != http.StatusTooManyRequests || a.Reason != "rate_limited" || retry < 1 || a.Details["limit"] != "send_user" {
		t.Fatalf("4th send over REST: %d %s (Retry-After %q), want 429 rate_limited send_user", a.status, a.raw, a.header.Get("Retry-After"))
	}
	c := dialWS(t, s.base, alice, "alice")
	c.write(fmt.Sprintf(`{"pub":{"id":"over-ws","topic":%q,"client_msg_id":"over-ws","content":{"text":"too many"}}}`, topic))
	if r := c.ctrl("over-ws"); r.Code != http.StatusTooManyRequests || r.Reason != "rate_limited" || r.Params["retry_after_ms"] == nil {
		t.Fatalf("pub over the limit: %+v, want ctrl 429 rate_limited", r)
	}
	if after := messageEvents(t, env.dbURL, "acme"); after != before {
		t.Fatalf("message events %d after the refused sends, want %d: a limited send wrote something", after, before)
	}
	if a := sendREST(t, s.base, bob, topic, "bob-1", `{"text":"me too"}`); a.status/100 != 2 {
		t.Fatalf("another sender of the tenant: %d %s", a.status, a.raw)
	}
	demo := signUp(t, s.base, "carol")
	dg := createGroup(t, s.base, demo, "demo-group")
	for i := range 5 {
		if a := sendREST(t, s.base, demo, "grp"+dg, "demo-"+strconv.Itoa(i), `{"text":"hi"}`); a.status/100 != 2 {
			t.Fatalf("demo tenant send %d: %d %s", i, a.status, a.raw)
		}
	}
	if n := messageEvents(t, env.dbURL, "acme"); n != before+1 {
		t.Fatalf("acme message events %d, want %d", n, before+1)
	}

	// Friend requests per user.
	carol := acmeUser(t, s.base, "carol")
	if a := call(t, http.MethodPost, s.base+"/v1/im/friends/requests", alice.token, "fr-1", `{"user_id":"`+bob.id+`"}`); a.status != 200 {
		t.Fatalf("first friend request: %d %s", a.status, a.raw)
	}
	if a := call(t, http.MethodPost, s.base+"/v1/im/friends/requests", alice.token, "fr-2", `{"user_id":"`+carol.id+`"}`); a.status != 429 || a.Reason != "rate_limited" {
		t.Fatalf("second friend request within the minute: %d %s, want 429", a.status, a.raw)
	}

	// REST requests per user, in a tenant of their own.
	if out, errOut, err := runCLI(t, "tenant", "create", "beta", "--no-api-key", "--config", s.file,
		"--settings", `{"rate_limits":{"rest_user":3}}`); err != nil {
		t.Fatalf("tenant create: %v\n%s\n%s", err, out, errOut)
	}
	body := `{"tenant":"beta","login":"bea","password":"correct horse battery"}`
	if a := call(t, http.MethodPost, s.base+"/v1/im/auth/register", "", "", body); a.status != http.StatusCreated {
		t.Fatalf("register: %d %s", a.status, a.raw)
	}
	bea := call(t, http.MethodPost, s.base+"/v1/im/auth/login", "", "", body)
	tok, _ := bea.Data["token"].(string)
	for i := range 3 {
		if a := call(t, http.MethodGet, s.base+"/v1/im/unread", tok, "", ""); a.status != 200 {
			t.Fatalf("request %d: %d %s", i, a.status, a.raw)
		}
	}
	if a := call(t, http.MethodGet, s.base+"/v1/im/unread", tok, "", ""); a.status != 429 || a.Details["limit"] != "rest_user" {
		t.Fatalf("4th request within the minute: %d %s, want 429 rest_user", a.status, a.raw)
	}
}

// TestCodesAndActionTokensOverREST: with register_requires_code set, registration needs a code
// the gateway (a real HTTP server) received; a code passes once, and a registration refused for
// bad input does not spend it. An invite token for a group is
// consumed by exactly one of many concurrent REST consumers.
func TestCodesAndActionTokensOverREST(t *testing.T) {
	t.Parallel()
	codes := make(chan string, 8)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			To   string `json:"to"`
			Code string `json:"code"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.To != "+8613800138000" {
			http.Error(w, "bad delivery", http.StatusBadRequest)
			return
		}
		codes <- body.Code
	}))
	t.Cleanup(gw.Close)
	env := newServeEnv(t, nil, true)
	env.extra = fmt.Sprintf(`verify: {hash_key: "a test key of 32 bytes, not secret", gateway_url: %q}`, gw.URL)
	s := env.start(t, "codes")
	if out, errOut, err := runCLI(t, "tenant", "create", "acme", "--no-api-key", "--config", s.file,
		"--settings", `{"register_requires_code":true}`); err != nil {
		t.Fatalf("tenant create: %v\n%s\n%s", err, out, errOut)
	}
	reg := func(code string) answer {
		return call(t, http.MethodPost, s.base+"/v1/im/auth/register", "", "", fmt.Sprintf(
			`{"tenant":"acme","login":"dave","password":"correct horse battery","phone":"+86 138 0013 8000","code":%q}`, code))
	}
	if a := reg(""); a.status != http.StatusForbidden || a.Reason != "code_required" {
		t.Fatalf("register without a code: %d %s", a.status, a.raw)
	}
	target := `{"tenant":"acme","scene":"register","phone":"+8613800138000"}`
	if a := call(t, http.MethodPost, s.base+"/v1/im/verify/codes", "", "", target); a.status != http.StatusCreated {
		t.Fatalf("create code: %d %s", a.status, a.raw)
	}
	code := <-codes
	if a := call(t, http.MethodPost, s.base+"/v1/im/verify/codes/status", "", "", target); a.status != 200 || a.Data["active"] != true {
		t.Fatalf("status: %d %s", a.status, a.raw)
	}
	if a := call(t, http.MethodPost, s.base+"/v1/im/verify/codes", "", "", target); a.status != http.StatusTooManyRequests ||
		a.Details["limit"] != "code_resend" {
		t.Fatalf("resend at once: %d %s, want 429 code_resend", a.status, a.raw)
	}
	// Bad input spends nothing: a registration refused for its password or login leaves the code
	// to the corrected one.
	for _, bad := range []string{`"login":"dave","password":"short"`, `"login":"d a v e","password":"correct horse battery"`} {
		if a := call(t, http.MethodPost, s.base+"/v1/im/auth/register", "", "", fmt.Sprintf(
			`{"tenant":"acme",%s,"phone":"+8613800138000","code":%q}`, bad, code)); a.status != http.StatusBadRequest {
			t.Fatalf("register with %s: %d %s, want 400", bad, a.status, a.raw)
		}
	}
	if a := reg(code); a.status != http.StatusCreated {
		t.Fatalf("register with the code: %d %s", a.status, a.raw)
	}
	if a := call(t, http.MethodPost, s.base+"/v1/im/auth/register", "", "", fmt.Sprintf(
		`{"tenant":"acme","login":"eve","password":"correct horse battery","phone":"+8613800138000","code":%q}`, code)); a.status != http.StatusForbidden || a.Reason != "code_not_found" {
		t.Fatalf("the code again: %d %s, want 403 code_not_found", a.status, a.raw)
	}
}

// TestInviteLinksOverREST: an invite link (a join_group action token) is issued only by a member
// who may invite; consuming it joins the group, with or without join approval, and of many
// concurrent consumers exactly one gets in. A consumer the join would refuse (banned), or a link
// whose issuer may no longer invite, is refused without spending the token.
func TestInviteLinksOverREST(t *testing.T) {
	t.Parallel()
	s := newServeEnv(t, nil, true).start(t, "links")
	issue := func(u user, key, gid string) answer {
		return call(t, http.MethodPost, s.base+"/v1/im/action-tokens", u.token, key, fmt.Sprintf(`{"action":"join_group","subject":"grp%s"}`, gid))
	}
	consume := func(u user, key, token string) answer {
		return call(t, http.MethodPost, s.base+"/v1/im/action-tokens/consume", u.token, key, fmt.Sprintf(`{"action":"join_group","token":%q}`, token))
	}
	tokenOf := func(a answer) string {
		t.Helper()
		token, _ := a.Data["token"].(string)
		if a.status != http.StatusCreated || token == "" {
			t.Fatalf("issue: %d %s", a.status, a.raw)
		}
		return token
	}
	// joined checks that u is a member of gid by the command side, which a join refuses as already_member.
	probes := 0
	joined := func(u user, gid string) bool {
		probes++
		a := call(t, http.MethodPost, s.base+"/v1/im/groups/"+gid+"/join", u.token, "probe-"+strconv.Itoa(probes), "")
		return a.status == http.StatusForbidden && a.Reason == "already_member"
	}

	owner := signUp(t, s.base, "olive")
	gid := createGroup(t, s.base, owner, "invite")
	if a := call(t, http.MethodPut, s.base+"/v1/im/groups/"+gid+"/settings", owner.token, "settings",
		`{"join_approval":true,"who_may_invite":"admin","who_may_announce":"admin","mute_all":false}`); a.status != http.StatusOK {
		t.Fatalf("settings: %d %s", a.status, a.raw)
	}
	token := tokenOf(issue(owner, "invite-1", gid))
	outsider := signUp(t, s.base, "oscar")
	if a := issue(outsider, "invite-2", gid); a.status != http.StatusForbidden {
		t.Fatalf("a non-member issues an invite: %d %s", a.status, a.raw)
	}

	const n = 12
	users := make([]user, n)
	for i := range users {
		users[i] = signUp(t, s.base, "joiner"+strconv.Itoa(i))
	}
	var wg sync.WaitGroup
	results := make([]answer, n)
	for i := range n {
		wg.Go(func() { results[i] = consume(users[i], "consume-"+strconv.Itoa(i), token) })
	}
	wg.Wait()
	var winner *user
	for i, r := range results {
		switch {
		case r.status == http.StatusOK:
			if winner != nil {
				t.Fatalf("two consumers succeeded: %s", r.raw)
			}
			winner = &users[i]
			j, _ := r.Data["joined"].(map[string]any)
			if r.Data["subject"] != "grp"+gid || j["group_id"] != gid || j["topic"] != "grp"+gid {
				t.Fatalf("consumed: %s", r.raw)
			}
		case r.status == http.StatusForbidden && r.Reason == "action_token_used":
		default:
			t.Fatalf("concurrent consume: %d %s", r.status, r.raw)
		}
	}
	if winner == nil {
		t.Fatalf("none of %d concurrent consumers succeeded", n)
	}
	if !joined(*winner, gid) {
		t.Fatal("the link's consumer is not a member of a group that needs approval")
	}
	for _, u := range users {
		if u.id != winner.id && joined(u, gid) {
			t.Fatalf("user %s joined without the link", u.id)
		}
	}

	// A member the settings do not let invite gets no link.
	if a := issue(*winner, "invite-3", gid); a.status != http.StatusForbidden || a.Reason != "not_admin" {
		t.Fatalf("a plain member issues a link where only admins invite: %d %s, want 403 not_admin", a.status, a.raw)
	}

	// A banned user's consume is refused and leaves the token for someone else.
	banned := users[0]
	if banned.id == winner.id {
		banned = users[1]
	}
	if a := call(t, http.MethodPost, s.base+"/v1/im/groups/"+gid+"/join-requests", banned.token, "ask", `{"message":"hi"}`); a.status != http.StatusOK {
		t.Fatalf("join request: %d %s", a.status, a.raw)
	}
	if a := call(t, http.MethodPost, s.base+"/v1/im/groups/"+gid+"/join-requests/"+banned.id+"/approve", owner.token, "approve", ""); a.status != http.StatusOK {
		t.Fatalf("approve: %d %s", a.status, a.raw)
	}
	if a := call(t, http.MethodDelete, s.base+"/v1/im/groups/"+gid+"/members/"+banned.id+"?ban=true", owner.token, "ban", ""); a.status != http.StatusOK {
		t.Fatalf("remove with a ban: %d %s", a.status, a.raw)
	}
	second := tokenOf(issue(owner, "invite-4", gid))
	if a := consume(banned, "consume-banned", second); a.status != http.StatusForbidden || a.Reason != "banned" {
		t.Fatalf("a banned user consumes a link: %d %s, want 403 banned", a.status, a.raw)
	}
	late := signUp(t, s.base, "lena")
	if a := consume(late, "consume-late", second); a.status != http.StatusOK || !joined(late, gid) {
		t.Fatalf("the link a banned user could not use: %d %s", a.status, a.raw)
	}

	// A link dies with its issuer's right to invite, unspent.
	admin := late
	if a := call(t, http.MethodPut, s.base+"/v1/im/groups/"+gid+"/members/"+admin.id+"/role", owner.token, "promote", `{"role":"admin"}`); a.status != http.StatusOK {
		t.Fatalf("promote: %d %s", a.status, a.raw)
	}
	third := tokenOf(issue(admin, "invite-5", gid))
	if a := call(t, http.MethodPut, s.base+"/v1/im/groups/"+gid+"/members/"+admin.id+"/role", owner.token, "demote", `{"role":"member"}`); a.status != http.StatusOK {
		t.Fatalf("demote: %d %s", a.status, a.raw)
	}
	if a := consume(outsider, "consume-demoted", third); a.status != http.StatusForbidden || a.Reason != "not_admin" || joined(outsider, gid) {
		t.Fatalf("a link of an issuer who may no longer invite: %d %s, want 403 not_admin", a.status, a.raw)
	}
	if a := call(t, http.MethodPut, s.base+"/v1/im/groups/"+gid+"/members/"+admin.id+"/role", owner.token, "promote-again", `{"role":"admin"}`); a.status != http.StatusOK {
		t.Fatalf("promote again: %d %s", a.status, a.raw)
	}
	if a := consume(outsider, "consume-promoted", third); a.status != http.StatusOK || !joined(outsider, gid) {
		t.Fatalf("the link once its issuer may invite again: %d %s", a.status, a.raw)
	}
}
