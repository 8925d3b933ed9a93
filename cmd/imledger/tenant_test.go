package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/ws"
)

// TestUnknownAndSuspendedTenantsAreRefusedEverywhere: serve wires the tenant registry into every
// entry point. A tenant never provisioned is refused at registration, login, token issue, REST
// and WebSocket login; once `tenant create` provisions it, it works; `tenant suspend` ends its
// sessions and refuses it everywhere again; after `tenant resume` tokens from before the
// suspension stay refused and new logins work.
func TestUnknownAndSuspendedTenantsAreRefusedEverywhere(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, nil, true)
	s := env.start(t, "solo")
	signer, err := auth.NewSigner(auth.Config{Keys: []auth.Key{{ID: "t1", Secret: testSecret}}})
	if err != nil {
		t.Fatal(err)
	}
	creds := `{"tenant":"acme","login":"wile","password":"correct horse battery"}`
	refused := func(reason string) {
		t.Helper()
		if a := call(t, http.MethodPost, s.base+"/v1/im/auth/register", "", "", creds); a.status != 403 || a.Reason != reason {
			t.Fatalf("register: %d %s, want 403 %s", a.status, a.raw, reason)
		}
		if a := call(t, http.MethodPost, s.base+"/v1/im/auth/login", "", "", creds); a.status != 403 || a.Reason != reason {
			t.Fatalf("login: %d %s, want 403 %s", a.status, a.raw, reason)
		}
		tok, _ := signer.Issue(domain.MustTenantID("acme"), 7, time.Hour)
		if a := call(t, http.MethodGet, s.base+"/v1/im/unread", tok, "", ""); a.status != 403 || a.Reason != reason {
			t.Fatalf("REST with a token of the tenant: %d %s, want 403 %s", a.status, a.raw, reason)
		}
		if r := wsLogin(t, s.base, tok); r.Code != 403 || r.Reason != reason {
			t.Fatalf("WebSocket login: %+v, want 403 %s", r, reason)
		}
		if _, _, err := runCLI(t, "token", "issue", "--tenant", "acme", "--user", "7", "--config", s.file); err == nil || !strings.Contains(err.Error(), reason) {
			t.Fatalf("token issue: %v, want %s", err, reason)
		}
	}
	refused("tenant_not_found")

	if out, errOut, err := runCLI(t, "tenant", "create", "acme", "--config", s.file); err != nil {
		t.Fatalf("tenant create: %v\n%s\n%s", err, out, errOut)
	}
	if a := call(t, http.MethodPost, s.base+"/v1/im/auth/register", "", "", creds); a.status != 201 {
		t.Fatalf("register after tenant create: %d %s", a.status, a.raw)
	}
	a := call(t, http.MethodPost, s.base+"/v1/im/auth/login", "", "", creds)
	token, _ := a.Data["token"].(string)
	uid, _ := a.Data["user_id"].(string)
	if a.status != 200 || token == "" {
		t.Fatalf("login after tenant create: %d %s", a.status, a.raw)
	}
	session := dialWS(t, s.base, user{id: uid, token: token}, "wile@acme")
	if out, _, err := runCLI(t, "tenant", "list", "--config", s.file); err != nil || !strings.Contains(out, "acme") || !strings.Contains(out, "demo") {
		t.Fatalf("tenant list: %v\n%s", err, out)
	}

	if out, errOut, err := runCLI(t, "tenant", "suspend", "acme", "--reason", "unpaid", "--config", s.file); err != nil {
		t.Fatalf("tenant suspend: %v\n%s\n%s", err, out, errOut)
	}
	session.endedWith("tenant_suspended", 5*time.Second)
	if a := call(t, http.MethodGet, s.base+"/v1/im/unread", token, "", ""); a.status != 403 || a.Reason != "tenant_suspended" {
		t.Fatalf("REST of a suspended tenant: %d %s", a.status, a.raw)
	}
	refused("tenant_suspended")
	if a := call(t, http.MethodPost, s.base+"/v1/im/auth/register", "", "", `{"tenant":"demo","login":"roadrunner","password":"correct horse battery"}`); a.status != 201 {
		t.Fatalf("another tenant is not affected: %d %s", a.status, a.raw)
	}

	if out, errOut, err := runCLI(t, "tenant", "resume", "acme", "--config", s.file); err != nil {
		t.Fatalf("tenant resume: %v\n%s\n%s", err, out, errOut)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		a := call(t, http.MethodGet, s.base+"/v1/im/unread", token, "", "")
		if a.status == 401 && a.Reason == "token_revoked" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a token from before the suspension after the resume: %d %s", a.status, a.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a := call(t, http.MethodPost, s.base+"/v1/im/auth/login", "", "", creds); a.status != 200 {
		t.Fatalf("login after the resume: %d %s", a.status, a.raw)
	}
	out, _, err := runCLI(t, "tenant", "show", "acme", "--config", s.file)
	if err != nil || !strings.Contains(out, "status:") || !strings.Contains(out, "active") || !strings.Contains(out, "tokens_not_before:") {
		t.Fatalf("tenant show: %v\n%s", err, out)
	}
}

// wsLogin connects to base's gateway and answers the login with token.
func wsLogin(t *testing.T, base, token string) wsCtrl {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws://"+strings.TrimPrefix(base, "http://")+ws.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &wsClient{t: t, name: "login probe", conn: conn, done: make(chan struct{})}
	go c.read()
	defer c.close()
	c.write(fmt.Sprintf(`{"login":{"id":"login","token":%q}}`, token))
	return c.ctrl("login")
}
