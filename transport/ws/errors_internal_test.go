package ws

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
)

// TestMissingTenantDatabaseIsRetry: a read of a tenant whose database is missing is answered 503
// retry, not 404 not_found (its error also wraps domain.ErrNotFound) nor 500 internal.
func TestMissingTenantDatabaseIsRetry(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		fmt.Errorf("history: %w: %w", readmodels.ErrNotProvisioned, domain.ErrNotFound),
		fmt.Errorf("history: %w: Error 1146", readmodels.ErrNotProvisioned),
	} {
		c := mapError("7", err)
		if c.Code != http.StatusServiceUnavailable || c.Reason != ReasonRetry || c.Params["retryable"] != true {
			t.Errorf("%v: %d %s %v, want 503 retry {retryable: true}", err, c.Code, c.Reason, c.Params)
		}
	}
}

// TestRateLimitWaitBelowAMillisecond: a refusal whose wait is below a millisecond tells the
// client to retry after 1 ms, not 0 (which a client would take as "now", and be refused again).
func TestRateLimitWaitBelowAMillisecond(t *testing.T) {
	t.Parallel()
	c := mapError("7", &domain.RateLimitedError{Limit: limitSubLeave, RetryAfter: 300 * time.Microsecond})
	if c.Code != http.StatusTooManyRequests || c.Params["retry_after_ms"] != int64(1) {
		t.Fatalf("%d %v, want 429 with retry_after_ms 1", c.Code, c.Params)
	}
}
