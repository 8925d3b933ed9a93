package main

import (
	"database/sql"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/imledger/imledger/internal/testenv"
)

// A negative --batch or --workers is refused, naming the flag, instead of running with the
// defaults as if the flag had not been given.
func TestReplayRefusesNegativeSizes(t *testing.T) {
	t.Parallel()
	file := migratedConfig(t)
	for _, verify := range []bool{false, true} {
		for _, bad := range [][]string{{"--batch", "-5"}, {"--workers", "-1"}} {
			args := append([]string{"replay", "--config", file, "--projection", "messages-mysql"}, bad...)
			if verify {
				args = append(args, "--verify")
			}
			out, _, err := runCLI(t, args...)
			if err == nil || !strings.Contains(err.Error(), bad[0]) {
				t.Errorf("%s: %v, want a refusal naming %s\n%s", strings.Join(args[3:], " "), err, bad[0], out)
			}
		}
	}
}

// A tenant without a read-model database is refused by every projection, messages-hot too,
// instead of a verification that "matches the log" in no topics (a mistyped tenant passes) or a
// rebuild that writes Redis keys for a tenant that does not exist.
func TestReplayRefusesAnUnknownTenant(t *testing.T) {
	t.Parallel()
	file := migratedConfig(t)
	for _, projection := range replayable {
		for _, verify := range []bool{false, true} {
			args := []string{"replay", "--config", file, "--projection", projection, "--tenant", "nosuch"}
			if verify {
				args = append(args, "--verify")
			}
			out, _, err := runCLI(t, args...)
			if err == nil || !strings.Contains(err.Error(), "nosuch") {
				t.Errorf("%s: %v, want a refusal naming the tenant\n%s", strings.Join(args[3:], " "), err, out)
			}
		}
	}
}

// replay over every tenant that finds no tenant database (a wrong mysql.database_template, or
// nothing provisioned) fails and says that nothing was done, for a rebuild as for --verify: an
// empty success would read as "every tenant is fine".
func TestReplayOfEveryTenantFindsNone(t *testing.T) {
	t.Parallel()
	file := migratedConfig(t)
	for _, projection := range replayable {
		for _, verify := range []bool{false, true} {
			args := []string{"replay", "--config", file, "--projection", projection}
			done := "nothing rebuilt"
			if verify {
				args, done = append(args, "--verify"), "nothing verified"
			}
			out, _, err := runCLI(t, args...)
			if err == nil || !strings.Contains(err.Error(), "no tenant has a read-model database") ||
				!strings.Contains(err.Error(), "mysql.database_template") || !strings.Contains(err.Error(), done) {
				t.Errorf("%s: %v, want a failure saying no tenant was found and %s\n%s", strings.Join(args[3:], " "), err, done, out)
			}
		}
	}
}

// replay --verify over every tenant goes on past a tenant whose verification fails (here a
// tenant database that lost a table), reports every tenant and then fails naming the one.
func TestReplayVerifyReportsEveryTenant(t *testing.T) {
	t.Parallel()
	file := migratedConfig(t)
	yaml, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`database_template: "([^"]+)_\{tenant\}"`).FindSubmatch(yaml)
	if m == nil {
		t.Fatalf("no database template in %s", yaml)
	}
	for _, tenant := range []string{"aaa", "bbb"} {
		if out, errOut, err := runCLI(t, "tenant", "create", tenant, "--no-api-key", "--config", file); err != nil {
			t.Fatalf("tenant create %s: %v\n%s\n%s", tenant, err, out, errOut)
		}
	}
	db, err := sql.Open("mysql", testenv.MySQLDSN+string(m[1])+"_aaa")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DROP TABLE im_group_messages"); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "replay", "--config", file, "--projection", "messages-mysql", "--verify")
	if err == nil || !strings.Contains(err.Error(), "aaa") || strings.Contains(err.Error(), "bbb") {
		t.Errorf("verify of every tenant with aaa broken: %v, want a failure naming aaa only\n%s", err, out)
	}
	for _, want := range []string{"tenant aaa: messages-mysql not verified", "tenant bbb: 0 topics match",
		"messages-mysql: 2 tenants verified: 1 match, 0 differ, 1 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}
