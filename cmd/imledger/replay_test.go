package main

import (
	"strings"
	"testing"
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
