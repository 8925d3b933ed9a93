package retention_test

import (
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/retention"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  retention.Config
		want string // "" for valid
	}{
		{"defaults", retention.Config{}, ""},
		{"hourly", retention.Config{Run: true, Interval: time.Hour, MonthsAhead: 3, LockWait: time.Second}, ""},
		{"too often", retention.Config{Interval: time.Second}, "retention.interval"},
		{"too far ahead", retention.Config{MonthsAhead: 25}, "retention.months_ahead"},
		{"negative wait", retention.Config{LockWait: -time.Second}, "retention.lock_wait"},
	} {
		err := tc.cfg.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate() = %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := retention.New(retention.Config{}, retention.Deps{}); err == nil {
		t.Error("New without Tenants and Partitions succeeded")
	}
}
