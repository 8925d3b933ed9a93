package main

import (
	"math"
	"regexp"
	"strconv"
	"strings"
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
	n, _ := strconv.Atoi(sent[1])
	if n < 30 {
		t.Errorf("only %d messages sent in a second at 60/s:\n%s", n, out)
	}
	// The node's own account of the run: every send went through a sequencer batch.
	seq := regexp.MustCompile(`(?m)^  sequencer\s+(\d+) batches of ([\d.]+) sends; stages \(means\): allocate [\d.]+ms, append [\d.]+ms$`).FindStringSubmatch(out)
	if seq == nil {
		t.Fatalf("no sequencer line in the node report:\n%s", out)
	}
	batches, _ := strconv.Atoi(seq[1])
	mean, _ := strconv.ParseFloat(seq[2], 64)
	if batches == 0 || math.Abs(float64(batches)*mean-float64(n)) > float64(batches)*0.05+0.5 {
		t.Errorf("%d batches of %.1f sends do not add up to the %d sent:\n%s", batches, mean, n, out)
	}
	if !regexp.MustCompile(`(?m)^  scheduling  goroutines waited [\d.]+ms on average to run \([1-9]\d* waits\)$`).MatchString(out) {
		t.Errorf("no scheduling line in the node report:\n%s", out)
	}
	// The read side's account: the projectors drained and the CPU of the window and catch-up.
	if !regexp.MustCompile(`(?m)^projector lag at the end of the window \(events, from committed offsets\): .*imledger\.proj\.messages\.mysql\.v1 \d+`).MatchString(out) {
		t.Errorf("no projector lag at the end of the window:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^read models drained \(every projector at lag 0\) [\d.]+ s after the end of the window$`).MatchString(out) {
		t.Errorf("the read models did not drain:\n%s", out)
	}
	cpu := regexp.MustCompile(`(?m)^  this process \(node and clients\)\s+([\d.]+) / ([\d.]+)$`).FindStringSubmatch(out)
	if cpu == nil {
		t.Fatalf("no CPU line for the node:\n%s", out)
	}
	window, all := mustFloat(t, cpu[1]), mustFloat(t, cpu[2])
	if window <= 0 || all < window {
		t.Errorf("node CPU per 1,000 messages %v in the window, %v with the catch-up:\n%s", window, all, out)
	}
}

// TestBenchWSAgainstServe loads a running serve with its default embedded broker, as the recipe in
// docs/benchmarks.md does: the report reads the node's projector lag from the broker serve runs.
func TestBenchWSAgainstServe(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, nil, true)
	env.embeddedAddr = freeAddr(t)
	srv := env.start(t, "bench-ws-url")
	url := "ws" + strings.TrimPrefix(srv.base, "http") + "/v1/im/ws"
	out, errOut, err := runCLI(t, "bench", "ws", "--config", srv.file, "--url", url, "--clients", "4", "--groups", "1",
		"--rate", "20", "--duration", "1s", "--drain", "3s", "--lag-wait", "30s", "--first-user", "700", "--first-group", "950")
	if err != nil {
		t.Fatalf("bench ws: %v\n%s\n%s", err, out, errOut)
	}
	if !regexp.MustCompile(`(?m)^projector lag at the end of the window \(events, from committed offsets\): .*imledger\.proj\.messages\.mysql\.v1 \d+`).MatchString(out) {
		t.Errorf("no projector lag at the end of the window:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^read models drained \(every projector at lag 0\) [\d.]+ s after the end of the window$`).MatchString(out) {
		t.Errorf("the read models did not drain:\n%s", out)
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestMetricsURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"ws://127.0.0.1:8080/v1/im/ws":      "http://127.0.0.1:8080/metrics",
		"wss://im.example.com/v1/im/ws?x=1": "https://im.example.com/metrics",
		"http://127.0.0.1:8080/v1/im/ws":    "",
		"ws://[::1]:9/v1/im/ws":             "http://[::1]:9/metrics",
	} {
		got, err := metricsURL(in)
		if want == "" {
			if err == nil {
				t.Errorf("metricsURL(%q) = %q, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("metricsURL(%q) = %q, %v; want %q", in, got, err, want)
		}
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
		`(?m)^live projection into MySQL: 600 events in \S+: [1-9]\d* events/s, [\d.]+ CPU s per 1,000 events \([\d.]+ CPU s in all\)$`,
		`(?m)^rebuild from the event store into MySQL: 600 events in \S+: [1-9]\d* events/s, [\d.]+ CPU s per 1,000 events \([\d.]+ CPU s in all\)$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output does not match %s:\n%s", re, out)
		}
	}
}
