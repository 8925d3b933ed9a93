package rest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/rest"
)

func TestMapError(t *testing.T) {
	t.Parallel()
	_, verr := domain.NewClientMsgID("")
	tests := []struct {
		name   string
		err    error
		status int
		reason string
		detail map[string]any
	}{
		{"validation", fmt.Errorf("send: %w", verr), 400, rest.ReasonInvalid, map[string]any{"field": "client_msg_id", "reason": "required"}},
		{"bare invalid", domain.ErrInvalid, 400, rest.ReasonInvalid, nil},
		{"denied", domain.Deny("muted"), 403, rest.ReasonForbidden, map[string]any{"reason": "muted"}},
		{"not found", domain.ErrNotFound, 404, rest.ReasonNotFound, nil},
		{"concurrency", domain.ErrConcurrency, 409, rest.ReasonConflict, map[string]any{"retryable": true}},
		{"in progress", domain.ErrInProgress, 409, rest.ReasonInProgress, map[string]any{"retryable": true}},
		{"retryable", domain.Retryable("pg", errors.New("conn refused")), 503, rest.ReasonUnavailable, map[string]any{"retryable": true}},
		{"canceled", context.Canceled, 503, rest.ReasonUnavailable, nil},
		{"unknown", errors.New("boom"), 500, rest.ReasonInternal, nil},
		{"nil", nil, 500, rest.ReasonInternal, nil},
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
			if tt.status == http.StatusInternalServerError && e.Message != "internal error" {
				t.Errorf("500 message %q must be fixed", e.Message)
			}
			if again := rest.MapError(t.Context(), e); again != e {
				t.Error("an *Error must pass through unchanged")
			}
		})
	}
}
