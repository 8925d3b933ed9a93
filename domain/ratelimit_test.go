package domain_test

import (
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

// TestRetryAfterRoundsUp: a refusal never tells a client to retry after 0: waits below a
// millisecond (a second) are one millisecond (second), and the rest round up.
func TestRetryAfterRoundsUp(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		wait    time.Duration
		ms      int64
		seconds int
	}{
		{300 * time.Microsecond, 1, 1},
		{time.Millisecond, 1, 1},
		{1500 * time.Microsecond, 2, 1},
		{999 * time.Millisecond, 999, 1},
		{1001 * time.Millisecond, 1001, 2},
		{0, 1, 1},
	} {
		e := &domain.RateLimitedError{Limit: domain.RateSendUser, RetryAfter: c.wait}
		if got := e.RetryAfterMillis(); got != c.ms {
			t.Errorf("RetryAfterMillis of %s = %d, want %d", c.wait, got, c.ms)
		}
		if got := e.RetryAfterSeconds(); got != c.seconds {
			t.Errorf("RetryAfterSeconds of %s = %d, want %d", c.wait, got, c.seconds)
		}
	}
}
