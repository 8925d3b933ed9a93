package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	file := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(file, []byte("auth: {keys: [{id: k1, secret: \""+testSecret+"\"}]}\n"), 0o600); err != nil {
		t.Fatal(err)
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
}
