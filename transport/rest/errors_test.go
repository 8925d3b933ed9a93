package rest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/rest"
)

func TestMapError(t *testing.T) {
	t.Parallel()
	_, verr := domain.NewClientMsgID("")
	secret := errors.New(`pq: relation "events" does not exist at 10.0.0.5`)
	tests := []struct {
		name       string
		err        error
		status     int
		reason     string
		detail     map[string]any
		retryAfter bool
	}{
		{"validation", fmt.Errorf("send: %w", verr), 400, rest.ReasonInvalid, map[string]any{"field": "client_msg_id", "reason": "required"}, false},
		{"bare invalid", domain.ErrInvalid, 400, rest.ReasonInvalid, nil, false},
		{"credentials", account.ErrInvalidCredentials, 401, rest.ReasonInvalidCredentials, nil, false},
		{"api key", account.ErrInvalidAPIKey, 401, rest.ReasonAPIKeyInvalid, nil, false},
		{"expired", fmt.Errorf("%w at noon", auth.ErrTokenExpired), 401, rest.ReasonTokenExpired, nil, false},
		{"token", fmt.Errorf("%w: bad signature", auth.ErrTokenInvalid), 401, rest.ReasonTokenInvalid, nil, false},
		{"denied", fmt.Errorf("post: %w", domain.Deny("muted")), 403, "muted", nil, false},
		{"bare forbidden", domain.ErrForbidden, 403, rest.ReasonForbidden, nil, false},
		{"not found", domain.ErrNotFound, 404, rest.ReasonNotFound, nil, false},
		{"concurrency", domain.ErrConcurrency, 409, rest.ReasonConflict, map[string]any{"retryable": true}, false},
		{"lost race", &group.ConflictError{Op: "transfer", Err: domain.ErrConcurrency}, 409, rest.ReasonConflict, nil, false},
		{"in progress", domain.ErrInProgress, 409, rest.ReasonInProgress, map[string]any{"retryable": true}, false},
		{"retryable", domain.Retryable("pg", secret), 503, rest.ReasonRetry, map[string]any{"retryable": true}, true},
		{"tenant database missing", fmt.Errorf("read: %w: %w", readmodels.ErrNotProvisioned, domain.ErrNotFound), 503, rest.ReasonRetry,
			map[string]any{"retryable": true}, true},
		{"canceled", context.Canceled, 503, rest.ReasonRetry, nil, true},
		{"unknown", secret, 500, rest.ReasonInternal, nil, false},
		{"nil", nil, 500, rest.ReasonInternal, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := rest.MapError(t.Context(), tt.err)
			if e.GetStatus() != tt.status || e.Code != tt.status || e.Reason != tt.reason {
				t.Fatalf("got %d/%d %s, want %d %s", e.GetStatus(), e.Code, e.Reason, tt.status, tt.reason)
			}
			for k, v := range tt.detail {
				if e.Details[k] != v {
					t.Errorf("details.%s = %v, want %v", k, e.Details[k], v)
				}
			}
			if got := e.GetHeaders().Get("Retry-After") != ""; got != tt.retryAfter {
				t.Errorf("Retry-After present %v, want %v", got, tt.retryAfter)
			}
			if tt.status >= 500 && (e.Message != "internal error" && e.Message != "temporarily unavailable, retry") {
				t.Errorf("5xx message %q must be fixed", e.Message)
			}
			if again := rest.MapError(t.Context(), e); again != e {
				t.Error("an *Error must pass through unchanged")
			}
		})
	}
}

func TestRateLimitsFailClosedWithoutRedis(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{})
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200e6})
	t.Cleanup(func() { _ = down.Close() })
	idem, err := rest.NewPostgresIdempotency(s.pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.serve(t, rest.Config{}, rest.Handlers{Accounts: s.accounts, Tokens: s.signer, Redis: down, Idempotency: idem})
	if _, err := s.accounts.Register(testCtx(t), account.Register{Tenant: s.tenant, Login: "alice", Password: "password1"}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/im/auth/login", "/v1/im/auth/register"} {
		a := s.do(t, req{method: http.MethodPost, path: path, body: `{"tenant":"` + s.tenant.String() + `","login":"alice","password":"password1"}`})
		expect(t, path+" with Redis down", a, http.StatusServiceUnavailable, rest.ReasonRetry)
		if a.Header.Get("Retry-After") == "" {
			t.Errorf("%s: 503 without Retry-After", path)
		}
	}
}
