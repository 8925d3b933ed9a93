package rest

import (
	"context"
	"errors"
	"net/http"

	"github.com/imledger/imledger/domain"
)

// Stable reasons of error answers. Clients may switch on them; they are never renamed.
const (
	ReasonInvalid              = "invalid"                // 400: input rejected; details {field, reason}
	ReasonUnauthenticated      = "unauthenticated"        // 401: no or bad principal
	ReasonForbidden            = "forbidden"              // 403: details {reason}, e.g. not_member
	ReasonNotFound             = "not_found"              // 404
	ReasonConflict             = "conflict"               // 409: concurrent change; retryable
	ReasonInProgress           = "in_progress"            // 409: identical request still running; retryable
	ReasonTooLarge             = "too_large"              // 413: body over the limit
	ReasonUnsupportedMediaType = "unsupported_media_type" // 415/406
	ReasonUnavailable          = "unavailable"            // 503: a dependency is down; retryable
	ReasonInternal             = "internal"               // 500: anything else; no internal text
)

// MapError is the one mapping from errors to HTTP answers:
//
//	domain.ErrInvalid     → 400 invalid      details {field, reason[, detail]} from *domain.ValidationError
//	domain.ErrForbidden   → 403 forbidden    details {reason} from *domain.DeniedError
//	domain.ErrNotFound    → 404 not_found
//	domain.ErrConcurrency → 409 conflict     details {retryable: true}
//	domain.ErrInProgress  → 409 in_progress  details {retryable: true}
//	domain.ErrRetryable, context deadline or cancellation
//	                      → 503 unavailable  details {retryable: true}, Retry-After: 1
//	anything else         → 500 internal, with a fixed message: internal text never reaches a client.
//
// An *Error passes through unchanged.
func MapError(ctx context.Context, err error) *Error { return mapError(RequestID(ctx), err) }

func mapError(requestID string, err error) *Error {
	var (
		e      *Error
		ve     *domain.ValidationError
		denied *domain.DeniedError
	)
	retry := map[string]any{"retryable": true}
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &ve):
		d := map[string]any{"field": ve.Field, "reason": ve.Reason}
		if ve.Detail != "" {
			d["detail"] = ve.Detail
		}
		return newError(requestID, http.StatusBadRequest, ReasonInvalid, ve.Error(), d)
	case errors.Is(err, domain.ErrInvalid):
		return newError(requestID, http.StatusBadRequest, ReasonInvalid, "invalid input", nil)
	case errors.As(err, &denied):
		return newError(requestID, http.StatusForbidden, ReasonForbidden, "forbidden", map[string]any{"reason": denied.Reason})
	case errors.Is(err, domain.ErrForbidden):
		return newError(requestID, http.StatusForbidden, ReasonForbidden, "forbidden", nil)
	case errors.Is(err, domain.ErrNotFound):
		return newError(requestID, http.StatusNotFound, ReasonNotFound, "not found", nil)
	case errors.Is(err, domain.ErrConcurrency):
		return newError(requestID, http.StatusConflict, ReasonConflict, "concurrent modification, retry", retry)
	case errors.Is(err, domain.ErrInProgress):
		return newError(requestID, http.StatusConflict, ReasonInProgress, "an identical request is in progress, retry", retry)
	case errors.Is(err, domain.ErrRetryable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		e := newError(requestID, http.StatusServiceUnavailable, ReasonUnavailable, "temporarily unavailable, retry", retry)
		e.headers.Set("Retry-After", "1")
		return e
	}
	return newError(requestID, http.StatusInternalServerError, ReasonInternal, "internal error", nil)
}
