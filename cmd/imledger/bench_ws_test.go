package main

import (
	"regexp"
	"strconv"
	"testing"
)

// TestBenchWSInProcess runs bench ws against a node it starts itself: the groups are created,
// every client logs in, and every message is acked and delivered to every member.
func TestBenchWSInProcess(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, nil, false)
	file := env.config(t, "bench-ws", "127.0.0.1:1")
	out, errOut, err := runCLI(t, "bench", "ws", "--config", file, "--clients", "6", "--groups", "2",
		"--rate", "60", "--duration", "1s", "--drain", "3s", "--first-user", "500", "--first-group", "900")
	if err != nil {
		t.Fatalf("bench ws: %v\n%s\n%s", err, out, errOut)
	}
	m := regexp.MustCompile(`(?m)^delivered\s+(\d+)\s+\S+/s\s+\(expected (\d+)\)$`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] || m[1] == "0" {
		t.Fatalf("deliveries do not match the expected count:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^errors\s+0$`).MatchString(out) {
		t.Errorf("bench ws reported errors:\n%s", out)
	}
	sent := regexp.MustCompile(`(?m)^sent\s+(\d+)`).FindStringSubmatch(out)
	if n, _ := strconv.Atoi(sent[1]); n < 30 {
		t.Errorf("only %d messages sent in a second at 60/s:\n%s", n, out)
	}
}

// TestBenchProjection runs both projection benchmarks on a small history.
func TestBenchProjection(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, nil, false)
	file := env.config(t, "bench-proj", "127.0.0.1:1")
	out, errOut, err := runCLI(t, "bench", "projection", "--config", file, "--events", "600", "--topics", "6", "--tenant", "benchp")
	if err != nil {
		t.Fatalf("bench projection: %v\n%s\n%s", err, out, errOut)
	}
	for _, re := range []string{
		`(?m)^live projection into MySQL: 600 events in \S+: [1-9]\d* events/s$`,
		`(?m)^rebuild from the event store into MySQL: 600 events in \S+: [1-9]\d* events/s$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output does not match %s:\n%s", re, out)
		}
	}
}
