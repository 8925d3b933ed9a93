package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/internal/testenv"
)

// signUpIn registers login in tenant through base and logs in.
func signUpIn(t *testing.T, base, tenant, login string) user {
	t.Helper()
	body := fmt.Sprintf(`{"tenant":%q,"login":%q,"password":"correct horse battery"}`, tenant, login)
	if a := call(t, http.MethodPost, base+"/v1/im/auth/register", "", "", body); a.status != http.StatusCreated {
		t.Fatalf("register %s@%s: %d %s", login, tenant, a.status, a.raw)
	}
	a := call(t, http.MethodPost, base+"/v1/im/auth/login", "", "", body)
	token, _ := a.Data["token"].(string)
	id, _ := a.Data["user_id"].(string)
	if a.status != http.StatusOK || token == "" {
		t.Fatalf("login %s@%s: %d %s", login, tenant, a.status, a.raw)
	}
	return user{id: id, token: token}
}

// TestSuspendedTenantsSignedDownloadsAreRefused: a download URL signed while the tenant was
// active serves nothing once the tenant is suspended: 403 tenant_suspended, as every request of
// the tenant.
func TestSuspendedTenantsSignedDownloadsAreRefused(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, nil, true)
	env.extra = fmt.Sprintf("files: {dir: %q}", filepath.Join(t.TempDir(), "files"))
	s := env.start(t, "solo")
	if out, errOut, err := runCLI(t, "tenant", "create", "acme", "--config", s.file); err != nil {
		t.Fatalf("tenant create: %v\n%s\n%s", err, out, errOut)
	}
	u := signUpIn(t, s.base, "acme", "wile")
	a := call(t, http.MethodPost, s.base+"/v1/im/files", u.token, "f1", `{"name":"a.txt","content_type":"text/plain","size":"5"}`)
	id, _ := a.Data["file_id"].(string)
	if id == "" {
		id, _ = a.Data["id"].(string)
	}
	if a.status != 201 || id == "" {
		t.Fatalf("register file: %d %s", a.status, a.raw)
	}
	req, _ := http.NewRequest(http.MethodPut, s.base+"/v1/im/files/"+id+"/content", strings.NewReader("hello"))
	req.Header.Set("Authorization", "Bearer "+u.token)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Idempotency-Key", "up1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	var url string
	deadline := time.Now().Add(10 * time.Second)
	for {
		a = call(t, http.MethodGet, s.base+"/v1/im/files/"+id+"/url", u.token, "", "")
		url, _ = a.Data["url"].(string)
		if a.status == 200 && url != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("url: %d %s", a.status, a.raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body := get(t, s.base+url); code != http.StatusOK || body != "hello" {
		t.Fatalf("download while active: %d %q", code, body)
	}
	if out, errOut, err := runCLI(t, "tenant", "suspend", "acme", "--config", s.file); err != nil {
		t.Fatalf("tenant suspend: %v\n%s\n%s", err, out, errOut)
	}
	deadline = time.Now().Add(5 * time.Second) // the node hears of the suspension over Redis
	for {
		code, body := get(t, s.base+url)
		if code == http.StatusForbidden && strings.Contains(body, `"tenant_suspended"`) && !strings.Contains(body, "hello") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("download of a suspended tenant's file: %d %s, want 403 tenant_suspended", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTenantWithoutDatabaseIsUnavailable: a provisioned tenant whose MySQL database is dropped
// while it is in use answers its reads 503 retry (never 500 internal or 404 not_found), its sends
// still succeed, another tenant is not affected, and provisioning it again serves it again.
func TestTenantWithoutDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, nil, true)
	s := env.start(t, "solo")
	if out, errOut, err := runCLI(t, "tenant", "create", "acme", "--no-api-key", "--config", s.file); err != nil {
		t.Fatalf("tenant create: %v\n%s\n%s", err, out, errOut)
	}
	u := signUpIn(t, s.base, "acme", "wile")
	v := signUpIn(t, s.base, "acme", "coyote")
	gid := createGroup(t, s.base, u, "g")
	joinGroup(t, s.base, v, gid)
	d := signUp(t, s.base, "demo1")
	dg := createGroup(t, s.base, d, "dg")
	db, err := sql.Open("mysql", testenv.MySQLServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DROP DATABASE `" + env.template + "_acme`"); err != nil {
		t.Fatal(err)
	}
	reads := []string{"/v1/im/unread", "/v1/im/conversations", "/v1/im/groups/" + gid, "/v1/im/groups/" + gid + "/members",
		"/v1/im/topics/grp" + gid + "/messages", "/v1/im/users/" + v.id, "/v1/im/groups", "/v1/im/friends"}
	for _, p := range reads {
		if a := call(t, http.MethodGet, s.base+p, u.token, "", ""); a.status != http.StatusServiceUnavailable || a.Reason != "retry" {
			t.Errorf("GET %s without the tenant's database: %d %s, want 503 retry", p, a.status, a.raw)
		}
	}
	if a := sendREST(t, s.base, u, "grp"+gid, "c1", `{"text":"x"}`); a.status != http.StatusCreated {
		t.Fatalf("send without the tenant's database: %d %s", a.status, a.raw)
	}
	if a := sendREST(t, s.base, d, "grp"+dg, "d1", `{"text":"hi"}`); a.status != http.StatusCreated {
		t.Fatalf("another tenant's send: %d %s", a.status, a.raw)
	}
	waitProjected(t, env, "grp"+dg, 1) // another tenant's projections go on
	for _, p := range []string{"/v1/im/unread", "/v1/im/topics/grp" + dg + "/messages", "/v1/im/groups/" + dg} {
		if a := call(t, http.MethodGet, s.base+p, d.token, "", ""); a.status != http.StatusOK {
			t.Errorf("another tenant's GET %s: %d %s", p, a.status, a.raw)
		}
	}
	if out, errOut, err := runCLI(t, "tenant", "create", "acme", "--no-api-key", "--config", s.file); err != nil {
		t.Fatalf("tenant create again: %v\n%s\n%s", err, out, errOut)
	}
	for _, p := range []string{"/v1/im/unread", "/v1/im/groups", "/v1/im/topics/grp" + gid + "/messages"} {
		if a := call(t, http.MethodGet, s.base+p, u.token, "", ""); a.status != http.StatusOK {
			t.Errorf("GET %s after provisioning again: %d %s", p, a.status, a.raw)
		}
	}
}

// TestTenantAPIKeyLimitCountsPublicRequests: a tenant's rest_api_key limit counts every REST
// request carrying one of its API keys, public ones (login) included, in one counter: with a
// limit of 3, two logins and a read with the key pass and the next read is 429 rest_api_key.
func TestTenantAPIKeyLimitCountsPublicRequests(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, nil, true)
	s := env.start(t, "solo")
	out, errOut, err := runCLI(t, "tenant", "create", "acme", "--settings", `{"rate_limits":{"rest_api_key":3}}`, "--config", s.file)
	if err != nil {
		t.Fatalf("tenant create: %v\n%s\n%s", err, out, errOut)
	}
	_, key, _ := strings.Cut(out, "api_key: ")
	key = strings.TrimSpace(key)
	creds := `{"tenant":"acme","login":"wile","password":"correct horse battery"}`
	if a := call(t, http.MethodPost, s.base+"/v1/im/auth/register", "", "", creds); a.status != http.StatusCreated {
		t.Fatalf("register: %d %s", a.status, a.raw)
	}
	do := func(method, path, token, body string) answer {
		t.Helper()
		req, _ := http.NewRequest(method, s.base+path, strings.NewReader(body))
		req.Header.Set("X-IM-API-Key", key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		a := answer{status: resp.StatusCode, header: resp.Header, raw: string(b)}
		_ = json.Unmarshal(b, &a)
		return a
	}
	var token string
	for k := range 2 {
		a := do(http.MethodPost, "/v1/im/auth/login", "", creds)
		if a.status != http.StatusOK {
			t.Fatalf("login %d with the API key: %d %s", k, a.status, a.raw)
		}
		token, _ = a.Data["token"].(string)
	}
	if a := do(http.MethodGet, "/v1/im/unread", token, ""); a.status != http.StatusOK {
		t.Fatalf("3rd request with the API key: %d %s", a.status, a.raw)
	}
	if a := do(http.MethodGet, "/v1/im/unread", token, ""); a.status != http.StatusTooManyRequests || a.Details["limit"] != "rest_api_key" {
		t.Fatalf("4th request with the API key under rest_api_key 3: %d %s, want 429 rest_api_key", a.status, a.raw)
	}
}
