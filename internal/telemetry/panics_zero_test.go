package telemetry_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/internal/telemetry"
)

func TestPanicsExportedAtZero(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if _, err := telemetry.NewPanics(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "imledger_panics_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetCounter().GetValue() != 0 {
				t.Errorf("a fresh counter is at %v", m.GetCounter().GetValue())
			}
			for _, l := range m.GetLabel() {
				seen[l.GetValue()] = true
			}
		}
	}
	for _, c := range []string{"rest", "ws"} {
		if !seen[c] {
			t.Errorf("imledger_panics_total{component=%q} is not exported before the first panic (have %v)", c, seen)
		}
	}
}
