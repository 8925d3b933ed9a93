package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// adminSend runs `imledger admin send` against node s's configuration and returns the result it
// printed and its error.
func adminSend(t *testing.T, s *served, typ, tenant, payload string) (domain.AdminResult, error) {
	t.Helper()
	out, errOut, err := runCLI(t, "admin", "send", "--type", typ, "--tenant", tenant, "--payload", payload,
		"--actor", "ops-1", "--config", s.file)
	var r domain.AdminResult
	if jerr := json.Unmarshal([]byte(out), &r); jerr != nil {
		t.Fatalf("admin send %s printed no result (%v, %v):\n%s\n%s", typ, err, jerr, out, errOut)
	}
	return r, err
}

// mustAdmin sends a command with `imledger admin send` and fails unless it succeeded.
func mustAdmin(t *testing.T, s *served, typ, tenant, payload string) domain.AdminResult {
	t.Helper()
	r, err := adminSend(t, s, typ, tenant, payload)
	if err != nil || r.Status != domain.AdminSucceeded {
		t.Fatalf("admin send %s %s: %v %+v", typ, payload, err, r)
	}
	return r
}

// TestAdminPlaneAcrossTwoNodes drives the admin plane as an admin system would, with `imledger
// admin send` against a two-node deployment: a ban closes the user's WebSocket sessions on both
// nodes within a second and refuses the login; revoke_tokens makes a valid token fail on both
// nodes; config_set changes the content limit on both nodes within a second; a refused command
// prints its reason and exits with an error.
func TestAdminPlaneAcrossTwoNodes(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, testenv.Kafka(t), true)
	var a, b *served
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a = env.start(t, "node-a") }()
	go func() { defer wg.Done(); b = env.start(t, "node-b") }()
	wg.Wait()
	if a == nil || b == nil {
		t.FailNow()
	}
	alice := signUp(t, a.base, "alice")
	bob := signUp(t, b.base, "bob")

	// A ban ends bob's sessions on both nodes and refuses him from then on.
	onA, onB := dialWS(t, a.base, bob, "bob@a"), dialWS(t, b.base, bob, "bob@b")
	r := mustAdmin(t, a, "user.ban", "demo", fmt.Sprintf(`{"user_id":%q,"reason":"spam"}`, bob.id))
	var banned struct {
		Banned bool `json:"banned"`
	}
	if err := json.Unmarshal(r.Result, &banned); err != nil || !banned.Banned {
		t.Fatalf("ban result: %s", r.Result)
	}
	start := time.Now()
	onA.endedWith("user_banned", time.Second)
	onB.endedWith("user_banned", time.Second)
	t.Logf("bob's sessions on both nodes ended %s after the result", time.Since(start).Round(time.Millisecond))
	body := `{"tenant":"demo","login":"bob","password":"correct horse battery"}`
	for _, n := range []*served{a, b} {
		if ans := call(t, http.MethodPost, n.base+"/v1/im/auth/login", "", "", body); ans.status != 403 || ans.Reason != "user_banned" {
			t.Fatalf("banned login on %s: %d %s", n.base, ans.status, ans.raw)
		}
		if ans := call(t, http.MethodGet, n.base+"/v1/im/unread", bob.token, "", ""); ans.status != 403 || ans.Reason != "user_banned" {
			t.Fatalf("banned token on %s: %d %s", n.base, ans.status, ans.raw)
		}
	}
	mustAdmin(t, b, "user.unban", "demo", fmt.Sprintf(`{"user_id":%q}`, bob.id))
	ans := call(t, http.MethodPost, b.base+"/v1/im/auth/login", "", "", body)
	if ans.status != 200 {
		t.Fatalf("login after the unban: %d %s", ans.status, ans.raw)
	}
	bob.token, _ = ans.Data["token"].(string)

	// A kick ends the sessions on both nodes; the token stays good.
	onA, onB = dialWS(t, a.base, bob, "bob@a again"), dialWS(t, b.base, bob, "bob@b again")
	mustAdmin(t, b, "user.kick", "demo", fmt.Sprintf(`{"user_id":%q,"reason":"rude"}`, bob.id))
	onA.endedWith("kicked", time.Second)
	onB.endedWith("kicked", time.Second)
	if ans := call(t, http.MethodGet, a.base+"/v1/im/unread", bob.token, "", ""); ans.status != 200 {
		t.Fatalf("a kicked user's token: %d %s", ans.status, ans.raw)
	}

	// Broadcasts: to a group as an ordinary system message of its topic, to the tenant as an info
	// frame on every node.
	bobWS := dialWS(t, a.base, bob, "bob@a listening")
	gidB := createGroup(t, b.base, bob, "announcements")
	bobWS.sub("grp" + gidB)
	mustAdmin(t, b, "message.broadcast", "demo", fmt.Sprintf(`{"group_id":%q,"content":{"text":"maintenance"}}`, gidB))
	bobWS.waitFor("the group broadcast", func(fs []wsFrame) bool {
		for _, f := range fs {
			if f.Data != nil && f.Data.Topic == "grp"+gidB && strings.Contains(string(f.Data.Content), "maintenance") {
				return true
			}
		}
		return false
	})
	mustAdmin(t, a, "message.broadcast", "demo", `{"content":"all hands"}`)
	bobWS.waitFor("the tenant broadcast", func(fs []wsFrame) bool {
		for _, f := range fs {
			if f.Info != nil && f.Info.What == "broadcast" {
				return true
			}
		}
		return false
	})

	// revoke_tokens: alice's token works on both nodes, then fails on both.
	for _, n := range []*served{a, b} {
		if ans := call(t, http.MethodGet, n.base+"/v1/im/unread", alice.token, "", ""); ans.status != 200 {
			t.Fatalf("alice's token on %s before the revocation: %d %s", n.base, ans.status, ans.raw)
		}
	}
	aliceWS := dialWS(t, b.base, alice, "alice@b")
	mustAdmin(t, a, "user.revoke_tokens", "demo", fmt.Sprintf(`{"user_id":%q,"reason":"leaked"}`, alice.id))
	aliceWS.endedWith("token_revoked", time.Second)
	for _, n := range []*served{a, b} {
		if ans := call(t, http.MethodGet, n.base+"/v1/im/unread", alice.token, "", ""); ans.status != 401 || ans.Reason != "token_revoked" {
			t.Fatalf("alice's revoked token on %s: %d %s", n.base, ans.status, ans.raw)
		}
	}
	fresh := signUpLogin(t, b.base, "alice")
	if ans := call(t, http.MethodGet, a.base+"/v1/im/unread", fresh, "", ""); ans.status != 200 {
		t.Fatalf("a token issued after the revocation: %d %s", ans.status, ans.raw)
	}

	// config_set lowers the content limit on both nodes within a second.
	gid := createGroup(t, a.base, user{id: alice.id, token: fresh}, "limits")
	topic := "grp" + gid
	long := `"` + strings.Repeat("x", 40) + `"`
	if ans := sendREST(t, b.base, user{id: alice.id, token: fresh}, topic, "before", long); ans.status != 201 {
		t.Fatalf("40 bytes before config_set: %d %s", ans.status, ans.raw)
	}
	mustAdmin(t, a, "tenant.config_set", "demo", `{"settings":{"max_content_bytes":32}}`)
	applied := time.Now()
	for i, n := range []*served{a, b} {
		for {
			ans := sendREST(t, n.base, user{id: alice.id, token: fresh}, topic, fmt.Sprintf("after-%d-%d", i, time.Now().UnixNano()), long)
			if ans.status == 400 && ans.Details["reason"] == "too_large" {
				break
			}
			if time.Since(applied) > time.Second {
				t.Fatalf("node %s still takes 40 bytes %s after config_set: %d %s", n.base, time.Since(applied), ans.status, ans.raw)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("both nodes refused 40 bytes %s after config_set answered", time.Since(applied).Round(time.Millisecond))
	if ans := sendREST(t, a.base, user{id: alice.id, token: fresh}, topic, "small", `"ok"`); ans.status != 201 {
		t.Fatalf("a small message after config_set: %d %s", ans.status, ans.raw)
	}

	// A refused command: the result is printed and the command fails with its reason.
	r, err := adminSend(t, a, "user.ban", "nosuch", `{"user_id":"1"}`)
	if err == nil || !strings.Contains(err.Error(), "tenant_not_found") || r.Status != domain.AdminRejected {
		t.Fatalf("command for an unknown tenant: %v %+v", err, r)
	}
	if _, _, err := runCLI(t, "admin", "send", "--type", "user.frobnicate", "--tenant", "demo", "--config", a.file); err == nil {
		t.Fatal("admin send of an unknown type succeeded")
	}
}

// signUpLogin logs login in to the demo tenant through base and returns the token.
func signUpLogin(t *testing.T, base, login string) string {
	t.Helper()
	body := fmt.Sprintf(`{"tenant":"demo","login":%q,"password":"correct horse battery"}`, login)
	a := call(t, http.MethodPost, base+"/v1/im/auth/login", "", "", body)
	token, _ := a.Data["token"].(string)
	if a.status != http.StatusOK || token == "" {
		t.Fatalf("login %s: %d %s", login, a.status, a.raw)
	}
	return token
}

// TestFailedAdminCommandIsReplayedFromTheCLI: with the MySQL server of the tenant databases down
// (a private server), `admin send tenant.provision` ends failed; `deadletter list --admin` shows
// the command; with MySQL back, `deadletter replay --admin` sends it again as a new command whose
// parent is the original and prints its succeeded result.
func TestFailedAdminCommandIsReplayedFromTheCLI(t *testing.T) {
	t.Parallel()
	mysql := testenv.StartPrivateMySQL(t)
	env := newServeEnv(t, testenv.Kafka(t), true)
	env.mysqlDSN = strings.TrimSuffix(mysql.DSN(), "?parseTime=true&multiStatements=true")
	s := env.start(t, "solo")
	mysql.Stop()
	r, err := adminSend(t, s, "tenant.provision", "late", `{}`)
	if err == nil || r.Status != domain.AdminFailed || r.Reason != "retries_exhausted" {
		t.Fatalf("provision with MySQL down: %v %+v", err, r)
	}
	out, errOut, err := runCLI(t, "deadletter", "list", "--admin", "--config", s.file)
	if err != nil || !strings.Contains(out, r.CommandEventID) || !strings.Contains(out, "tenant.provision") {
		t.Fatalf("deadletter list --admin: %v\n%s\n%s", err, out, errOut)
	}
	id, _ := r.Details["failure_id"].(string)
	mysql.Start()
	out, errOut, err = runCLI(t, "deadletter", "replay", "--admin", id, "--config", s.file)
	if err != nil {
		t.Fatalf("deadletter replay --admin %s: %v\n%s\n%s", id, err, out, errOut)
	}
	var replayed domain.AdminResult
	if err := json.Unmarshal([]byte(out), &replayed); err != nil || replayed.Status != domain.AdminSucceeded ||
		replayed.ParentEventID != r.CommandEventID || replayed.CommandEventID == r.CommandEventID {
		t.Fatalf("replayed: %v %+v\n%s", err, replayed, out)
	}
	creds := `{"tenant":"late","login":"wile","password":"correct horse battery"}`
	if a := call(t, http.MethodPost, s.base+"/v1/im/auth/register", "", "", creds); a.status != 201 {
		t.Fatalf("register into the replayed tenant: %d %s", a.status, a.raw)
	}
	if out, _, err := runCLI(t, "deadletter", "list", "--admin", "--status", "open", "--config", s.file); err != nil || strings.Contains(out, r.CommandEventID) {
		t.Fatalf("the replayed failure is still open: %v\n%s", err, out)
	}
}
