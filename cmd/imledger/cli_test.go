package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	// The tools create nothing: the event store comes from migrate (or serve).
	if _, errOut, err := runCLI(t, "migrate", "--config", file); err != nil {
		t.Fatalf("migrate: %v\n%s", err, errOut)
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

// TestToolsCreateNothing checks that the one-shot tools neither create nor migrate the event
// store: a database that does not exist or holds no event store is an error naming it, and it
// is left as it was. Only serve and migrate create, migrate and say so.
func TestToolsCreateNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, testenv.PostgresURL)
	if err != nil {
		t.Fatalf("PostgreSQL at %s: %v", testenv.PostgresURL, err)
	}
	defer conn.Close(ctx)
	missing := testenv.UniqueName("nosuch")
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), testenv.PostgresURL)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+missing+" WITH (FORCE)")
			_ = c.Close(context.Background())
		}
	})
	pc, err := pgx.ParseConfig(testenv.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", pc.User, pc.Host, pc.Port, missing)
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(keys, fmt.Appendf(nil, "auth: {keys: [{id: k1, secret: %q}]}\n", testSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"deadletter", "list", "--mysql-dsn", testenv.MySQLDSN},
		{"deadletter", "list", "--admin"},
		{"tenant", "list"},
		{"tenant", "show", "acme"},
		{"export", "--out", filepath.Join(t.TempDir(), "x.jsonl")},
		{"token", "issue", "--tenant", "acme", "--user", "7", "--config", keys},
	} {
		_, errOut, err := runCLI(t, append(args, "--postgres-url", url)...)
		if err == nil || !strings.Contains(err.Error(), `database "`+missing+`"`) || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("%v on a missing database: want an error naming it, got %v", args, err)
		}
		if strings.Contains(errOut, "migrations applied") {
			t.Errorf("%v logged a migration: %s", args, errOut)
		}
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", missing).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if exists {
			t.Fatalf("%v created database %s", args, missing)
		}
	}

	// A database without the event store stays empty.
	empty := testenv.Postgres(t)
	_, _, err = runCLI(t, "tenant", "list", "--postgres-url", empty)
	if err == nil || !strings.Contains(err.Error(), "holds no event store") || !strings.Contains(err.Error(), "imledger migrate") {
		t.Errorf("tenant list on an empty database: %v", err)
	}
	ec, err := pgx.Connect(ctx, empty)
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close(ctx)
	var tables int
	if err := ec.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("tenant list created %d tables in an empty database", tables)
	}

	// migrate creates and migrates, and says so once; the tools then work without a word of it.
	_, errOut, err := runCLI(t, "migrate", "--postgres-url", empty)
	if err != nil || strings.Count(errOut, "migrations applied") != 1 {
		t.Fatalf("migrate: %v\n%s", err, errOut)
	}
	out, errOut, err := runCLI(t, "tenant", "list", "--postgres-url", empty)
	if err != nil || strings.Contains(errOut, "migrations applied") {
		t.Fatalf("tenant list after migrate: %v\n%s\n%s", err, out, errOut)
	}
}

// TestUnknownSubcommandFails checks that a mistyped or missing subcommand is an error naming it,
// not help and success.
func TestUnknownSubcommandFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"tenant", "frobnicate"}, `unknown command "frobnicate" for "imledger tenant"`},
		{[]string{"deadletter", "lsit"}, `unknown command "lsit" for "imledger deadletter"`},
		{[]string{"tenant", "key", "frob"}, `unknown command "frob" for "imledger tenant key"`},
		{[]string{"tenant"}, `"imledger tenant" needs a command`},
	} {
		_, _, err := runCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("imledger %v: want an error with %q, got %v", tc.args, tc.want, err)
		}
	}
	if _, _, err := runCLI(t, "schema", "list"); err != nil {
		t.Errorf("a known subcommand failed: %v", err)
	}
}
