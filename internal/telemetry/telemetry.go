package telemetry

import (
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewLogger returns a logger writing to w at level (debug, info, warn, error) in format (text or
// json). Every record carries node_id. It fails on an unknown level or format.
func NewLogger(w io.Writer, level, format, nodeID string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	switch strings.ToLower(format) {
	case "json":
		h = slog.NewJSONHandler(w, opts)
	case "text":
		h = slog.NewTextHandler(w, opts)
	default:
		return nil, fmt.Errorf("log format %q: want text or json", format)
	}
	l := slog.New(h)
	if nodeID != "" {
		l = l.With("node_id", nodeID)
	}
	return l, nil
}

// NewRegistry returns a Prometheus registry holding the Go runtime and process collectors and a
// build-info gauge imledger_build_info{version}. Components register their own metrics on it.
func NewRegistry(version string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		// go_sched_latencies_seconds: how long goroutines wait to run, the first sign of a
		// node short of CPU.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/latencies:seconds$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "imledger_build_info",
		Help:        "Always 1; the version label names the running build.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	info.Set(1)
	reg.MustRegister(info)
	return reg
}
