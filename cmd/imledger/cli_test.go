package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/auth"
)

func TestTenantCreateRejectsABadID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"Bad Id!", "_acme", "Acme", strings.Repeat("a", 33)} {
		_, _, err := runCLI(t, "tenant", "create", id, "--mysql-dsn", "root@tcp(127.0.0.1:1)/", "--postgres-url", "postgres://nobody@127.0.0.1:1/x")
		if err == nil || !strings.Contains(err.Error(), "tenant id") || !strings.Contains(err.Error(), "1-32 of [a-z0-9_]") {
			t.Errorf("tenant create %q: want an error explaining the tenant id format, got %v", id, err)
		}
	}
	if _, _, err := runCLI(t, "tenant", "create"); err == nil {
		t.Error("tenant create without an id succeeded")
	}
}

func TestTokenIssue(t *testing.T) {
	t.Parallel()
	if _, _, err := runCLI(t, "token", "issue", "--tenant", "acme", "--user", "7"); err == nil || !strings.Contains(err.Error(), "auth.keys") {
		t.Errorf("token issue without keys: want an auth.keys error, got %v", err)
	}
	template := testenv.UniqueName("imtok")
	testenv.DropMySQLDatabasesAtCleanup(t, template+"_")
	file := filepath.Join(t.TempDir(), "keys.yaml")
	yaml := fmt.Sprintf("auth: {keys: [{id: k1, secret: %q}]}\npostgres: {url: %q}\nmysql: {server_dsn: %q, database_template: \"%s_{tenant}\"}\nredis: {key_prefix: %q}\n",
		testSecret, testenv.Postgres(t), testenv.MySQLDSN, template, testenv.UniqueName("imtok")+":")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	// Only provisioned, active tenants get tokens.
	if _, _, err := runCLI(t, "token", "issue", "--tenant", "acme", "--user", "7", "--config", file); err == nil || !strings.Contains(err.Error(), "tenant_not_found") {
		t.Fatalf("token issue for a tenant never provisioned: %v", err)
	}
	if out, errOut, err := runCLI(t, "tenant", "create", "acme", "--no-api-key", "--config", file); err != nil {
		t.Fatalf("tenant create: %v\n%s\n%s", err, out, errOut)
	}
	out, _, err := runCLI(t, "token", "issue", "--tenant", "acme", "--user", "usr7", "--ttl", "1m", "--config", file)
	if err != nil || strings.Count(strings.TrimSpace(out), ".") != 2 {
		t.Fatalf("token issue: %v %q", err, out)
	}
	signer, err := auth.NewSigner(auth.Config{Keys: []auth.Key{{ID: "k1", Secret: testSecret}}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := signer.Verify(strings.TrimSpace(out))
	if err != nil || p.Tenant.String() != "acme" || p.User != 7 || time.Until(p.ExpiresAt) > time.Minute+time.Second {
		t.Errorf("issued token: %+v, %v", p, err)
	}
	if _, _, err := runCLI(t, "token", "issue", "--tenant", "acme", "--user", "7", "--ttl", "10000h", "--config", file); err == nil {
		t.Error("a token beyond auth.max_ttl was issued")
	}
	if out, errOut, err := runCLI(t, "tenant", "suspend", "acme", "--config", file); err != nil || !strings.Contains(out, "suspended") {
		t.Fatalf("tenant suspend: %v\n%s\n%s", err, out, errOut)
	}
	if _, _, err := runCLI(t, "token", "issue", "--tenant", "acme", "--user", "7", "--config", file); err == nil || !strings.Contains(err.Error(), "tenant_suspended") {
		t.Fatalf("token issue for a suspended tenant: %v", err)
	}
}
