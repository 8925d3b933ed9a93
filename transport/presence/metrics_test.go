package presence_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/presence"
)

// TestRedisErrorsExportedAtZero checks that the error counter has a series per operation before
// the first failure.
func TestRedisErrorsExportedAtZero(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	reg := prometheus.NewRegistry()
	if _, err := presence.New(presence.Deps{Redis: rdb, Registerer: reg}, presence.Config{KeyPrefix: prefix, NodeID: "n1"}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() == "imledger_presence_redis_errors_total" {
			for _, m := range mf.GetMetric() {
				ops[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue() == 0
			}
		}
	}
	for _, op := range []string{"get", "heartbeat", "join", "leave", "login", "logout", "touch"} {
		if !ops[op] {
			t.Errorf("imledger_presence_redis_errors_total{op=%q} is not at 0 from the start (have %v)", op, ops)
		}
	}
}
