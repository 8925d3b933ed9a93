package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imledger/imledger/internal/testenv"
)

// A status, limit or group deadletter list cannot honour is refused, naming the flag, instead of
// listing nothing (a mistyped status), 100 (a limit of 0) or every admin command failure (--group
// with --admin): an operator would read "no dead letters" where there may be some.
func TestDeadLetterListRefusesBadFlags(t *testing.T) {
	t.Parallel()
	file := migratedConfig(t)
	for _, admin := range []bool{false, true} {
		list := []string{"deadletter", "list", "--config", file}
		if admin {
			list = append(list, "--admin")
		}
		if out, errOut, err := runCLI(t, list...); err != nil {
			t.Fatalf("%s: %v\n%s%s", strings.Join(list, " "), err, out, errOut)
		}
		for _, bad := range [][]string{{"--status", "opne"}, {"--status", "OPEN"}, {"--limit", "0"}, {"--limit", "-3"}} {
			args := append(append([]string{}, list...), bad...)
			out, _, err := runCLI(t, args...)
			if err == nil || !strings.Contains(err.Error(), bad[0]) {
				t.Errorf("%s: %v, want a refusal naming %s\n%s", strings.Join(args, " "), err, bad[0], out)
			}
		}
	}
	// Admin command failures have no consumer group to filter by: --group would be ignored.
	out, _, err := runCLI(t, "deadletter", "list", "--config", file, "--admin", "--group", "imledger.proj.messages.mysql.v1")
	if err == nil || !strings.Contains(err.Error(), "--group") {
		t.Errorf("deadletter list --admin --group: %v, want a refusal naming --group\n%s", err, out)
	}
}

// migratedConfig writes a configuration file naming a migrated PostgreSQL database, MySQL
// databases and a Redis key prefix of the test's own, and returns its path.
func migratedConfig(t *testing.T) string {
	t.Helper()
	template := testenv.UniqueName("imcfg")
	testenv.DropMySQLDatabasesAtCleanup(t, template+"_")
	file := filepath.Join(t.TempDir(), "config.yaml")
	yaml := fmt.Sprintf("postgres: {url: %q}\nmysql: {server_dsn: %q, database_template: \"%s_{tenant}\"}\nredis: {key_prefix: %q}\n",
		testenv.Postgres(t), testenv.MySQLDSN, template, testenv.UniqueName("imcfg")+":")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := runCLI(t, "migrate", "--config", file); err != nil {
		t.Fatalf("migrate: %v\n%s", err, errOut)
	}
	return file
}
