package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// nodeMetrics is one scrape of a node's /metrics.
type nodeMetrics map[string]*dto.MetricFamily

// metricsURL is the /metrics address of the node serving the WebSocket URL wsURL.
func metricsURL(wsURL string) (string, error) {
	u, err := url.Parse(wsURL)
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	default:
		return "", fmt.Errorf("%s: not a ws:// or wss:// URL", wsURL)
	}
	u.Path, u.RawQuery = "/metrics", ""
	return u.String(), nil
}

// scrapeMetrics reads the metrics of the node serving wsURL.
func scrapeMetrics(ctx context.Context, wsURL string) (nodeMetrics, error) {
	addr, err := metricsURL(wsURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", addr, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	return fams, nil
}

// histogram returns the count and sum of the series of name whose labels include label=value
// (any series when label is empty), summed.
func (m nodeMetrics) histogram(name, label, value string) (count uint64, sum float64) {
	for _, s := range m.series(name, label, value) {
		if h := s.GetHistogram(); h != nil {
			count += h.GetSampleCount()
			sum += h.GetSampleSum()
		}
	}
	return count, sum
}

// gauge returns the value of the series of name with label=value.
func (m nodeMetrics) gauge(name, label, value string) float64 {
	var v float64
	for _, s := range m.series(name, label, value) {
		v += s.GetGauge().GetValue()
	}
	return v
}

func (m nodeMetrics) series(name, label, value string) []*dto.Metric {
	f := m[name]
	if f == nil {
		return nil
	}
	var out []*dto.Metric
	for _, s := range f.GetMetric() {
		if label == "" || labelValue(s, label) == value {
			out = append(out, s)
		}
	}
	return out
}

// labels returns the values label takes in the series of name, sorted.
func (m nodeMetrics) labels(name, label string) []string {
	f := m[name]
	if f == nil {
		return nil
	}
	seen := map[string]bool{}
	for _, s := range f.GetMetric() {
		seen[labelValue(s, label)] = true
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

func labelValue(s *dto.Metric, label string) string {
	for _, l := range s.GetLabel() {
		if l.GetName() == label {
			return l.GetValue()
		}
	}
	return ""
}

// window is what a histogram gathered between two scrapes.
type window struct {
	count uint64
	sum   float64
}

func (w window) mean() float64 {
	if w.count == 0 {
		return 0
	}
	return w.sum / float64(w.count)
}

func between(before, after nodeMetrics, name, label, value string) window {
	c0, s0 := before.histogram(name, label, value)
	c1, s1 := after.histogram(name, label, value)
	if c1 < c0 { // the node restarted in between
		c0, s0 = 0, 0
	}
	return window{count: c1 - c0, sum: s1 - s0}
}

func millis(seconds float64) string {
	return fmt.Sprintf("%.2fms", seconds*1000)
}

// printNodeMetrics writes where a node's time went between two scrapes: its sequencer batches
// and their stages, how long its goroutines waited to run, and each projector's batches and lag.
func printNodeMetrics(w io.Writer, node string, before, after nodeMetrics) error {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s over the run:\n", node)
	sends := between(before, after, "imledger_send_batch_sends", "", "")
	fmt.Fprintf(&b, "  sequencer   %d batches of %.1f sends; stages (means): allocate %s, append %s\n",
		sends.count, sends.mean(),
		millis(between(before, after, "imledger_send_stage_seconds", "stage", "allocate").mean()),
		millis(between(before, after, "imledger_send_stage_seconds", "stage", "append").mean()))
	sched := between(before, after, "go_sched_latencies_seconds", "", "")
	fmt.Fprintf(&b, "  scheduling  goroutines waited %s on average to run (%d waits)\n", millis(sched.mean()), sched.count)
	for _, g := range after.labels("imledger_projection_batch_events", "consumer_group") {
		batches := between(before, after, "imledger_projection_batch_events", "consumer_group", g)
		writes := between(before, after, "imledger_projection_flush_seconds", "consumer_group", g)
		fmt.Fprintf(&b, "  projector   %s: %d batches of %.1f events, %s to write each; %.0f events behind at the last lag check\n",
			g, batches.count, batches.mean(), millis(writes.mean()),
			after.gauge("imledger_projection_lag_events", "consumer_group", g))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
