package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/imledger/imledger/internal/testenv"
)

// benchWriteConfig writes the configuration of a bench write run: a fresh database, a fresh
// sequence key prefix, an embedded Kafka and a relay that polls often.
func benchWriteConfig(t *testing.T) string {
	t.Helper()
	_, prefix := testenv.Redis(t)
	yaml := fmt.Sprintf(`
log: {level: warn}
postgres: {url: %q}
kafka: {embedded: {addr: "127.0.0.1:0", data_dir: memory}}
send: {seq: {key_prefix: %q}}
relay: {min_poll: 1ms, max_poll: 20ms}
`, missingDatabaseURL(t), prefix)
	file := filepath.Join(t.TempDir(), "bench.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// matchAll fails t for every pattern out does not match.
func matchAll(t *testing.T, out, logs string, patterns ...string) {
	t.Helper()
	for _, re := range patterns {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output does not match %s:\n%s\n%s", re, out, logs)
		}
	}
}

func TestBenchWrite(t *testing.T) {
	t.Parallel()
	out, logs, err := runCLI(t, "bench", "write", "--config", benchWriteConfig(t), "--count", "300", "--senders", "6", "--topics", "3", "--drain-timeout", "20s")
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	matchAll(t, out, logs,
		`(?m)^write: sends=300 errors=0 elapsed=\S+ sends/s=[1-9]\d* p50=\S+ p99=\S+ max=\S+$`,
		`(?m)^relay: events=300 batches=[1-9]\d* elapsed=\S+ events/s=[1-9]\d* caught_up_after_writes=\S+$`)
}

// TestBenchWriteWithPolicy has bench write create its groups and join its senders through the
// group commands, then send under the send policy: every send of a member is accepted.
func TestBenchWriteWithPolicy(t *testing.T) {
	t.Parallel()
	out, logs, err := runCLI(t, "bench", "write", "--config", benchWriteConfig(t), "--policy", "--no-relay", "--count", "60", "--senders", "4", "--topics", "3")
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	matchAll(t, out, logs,
		`(?m)^joins: 9 into 3 groups in \S+ \([1-9]\d* joins/s, 4 concurrent\)$`,
		`(?m)^write: sends=60 errors=0 `)
}

// TestBenchAdmin runs a short closed loop of bench admin against an in-process node that refuses
// unsigned commands: every ban and unban must succeed, so the commands are signed with a key the
// node knows and the users they are about exist in the tenant.
func TestBenchAdmin(t *testing.T) {
	t.Parallel()
	template := testenv.UniqueName("imbadm")
	testenv.DropMySQLDatabasesAtCleanup(t, template+"_")
	_, prefix := testenv.Redis(t)
	yaml := fmt.Sprintf(`
log: {level: warn}
auth: {keys: [{id: k1, secret: %q}]}
postgres: {url: %q}
mysql: {server_dsn: %q, database_template: "%s_{tenant}"}
redis: {key_prefix: %q}
kafka: {embedded: {addr: "127.0.0.1:0", data_dir: memory}}
admin: {allow_unsigned: false}
`, testSecret, missingDatabaseURL(t), testenv.MySQLDSN, template, prefix)
	file := filepath.Join(t.TempDir(), "bench.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out, logs, err := runCLI(t, "bench", "admin", "--config", file, "--pairs", "40", "--concurrency", "8", "--users", "20")
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, logs)
	}
	matchAll(t, out, logs, `(?m)^\s*succeeded 80, rejected 0, failed 0, no result 0$`)
}
