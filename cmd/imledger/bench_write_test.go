package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/internal/testenv"
)

func TestBenchWrite(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.Redis(t)
	yaml := fmt.Sprintf(`
log: {level: warn}
postgres: {url: %q}
kafka: {embedded: {addr: "127.0.0.1:0"}}
send: {seq: {key_prefix: %q}}
relay: {min_poll: 1ms, max_poll: 20ms}
`, missingDatabaseURL(t), prefix)
	file := filepath.Join(t.TempDir(), "bench.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := newRootCmd()
	var out, logs strings.Builder
	root.SetOut(&out)
	root.SetErr(&logs)
	root.SetArgs([]string{"bench", "write", "--config", file, "--count", "300", "--senders", "6", "--topics", "3", "--drain-timeout", "20s"})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	for _, re := range []string{
		`(?m)^write: sends=300 errors=0 elapsed=\S+ sends/s=[1-9]\d* p50=\S+ p99=\S+ max=\S+$`,
		`(?m)^relay: events=300 batches=[1-9]\d* elapsed=\S+ events/s=[1-9]\d* caught_up_after_writes=\S+$`,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("output does not match %s:\n%s\n%s", re, out.String(), logs.String())
		}
	}
}

// TestBenchWriteWithPolicy has bench write create its groups and join its senders through the
// group commands, then send under the send policy: every send of a member is accepted.
func TestBenchWriteWithPolicy(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.Redis(t)
	yaml := fmt.Sprintf(`
log: {level: warn}
postgres: {url: %q}
kafka: {embedded: {addr: "127.0.0.1:0"}}
send: {seq: {key_prefix: %q}}
`, missingDatabaseURL(t), prefix)
	file := filepath.Join(t.TempDir(), "bench.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := newRootCmd()
	var out, logs strings.Builder
	root.SetOut(&out)
	root.SetErr(&logs)
	root.SetArgs([]string{"bench", "write", "--config", file, "--policy", "--no-relay", "--count", "60", "--senders", "4", "--topics", "3"})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	for _, re := range []string{
		`(?m)^joins: 9 into 3 groups in \S+ \([1-9]\d* joins/s, 4 concurrent\)$`,
		`(?m)^write: sends=60 errors=0 `,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("output does not match %s:\n%s\n%s", re, out.String(), logs.String())
		}
	}
}
