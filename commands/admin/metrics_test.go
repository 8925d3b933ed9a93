package admin

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/domain"
)

// TestMetricsExportedAtZero checks that every command type and status has its series before
// the first command, so rates and alerts do not wait for one.
func TestMetricsExportedAtZero(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]map[string]bool{}
	for _, mf := range mfs {
		series[mf.GetName()] = map[string]bool{}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + " "
			}
			series[mf.GetName()][key] = true
		}
	}
	cmds := domain.AdminCommands()
	if len(cmds) == 0 {
		t.Fatal("no admin command types")
	}
	for _, c := range cmds {
		for _, st := range []string{domain.AdminSucceeded, domain.AdminRejected, domain.AdminFailed} {
			if !series["imledger_admin_commands_total"]["status="+st+" type="+string(c.Type)+" "] {
				t.Errorf("imledger_admin_commands_total{type=%q,status=%q} missing at start", c.Type, st)
			}
		}
		if !series["imledger_admin_command_seconds"]["type="+string(c.Type)+" "] {
			t.Errorf("imledger_admin_command_seconds{type=%q} missing at start", c.Type)
		}
	}
	for _, name := range []string{"imledger_admin_command_retries_total", "imledger_admin_command_dead_letters_total"} {
		if len(series[name]) != 1 {
			t.Errorf("%s: %d series at start, want 1", name, len(series[name]))
		}
	}
}
