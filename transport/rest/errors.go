package rest

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/transport/auth"
)

// Stable reasons of error answers. Clients may switch on them; they are never renamed. A refused
// command (403) answers with the refusal's own reason instead, e.g. not_member, muted,
// login_taken (the *domain.DeniedError reasons of the command packages).
const (
	ReasonInvalid                = "invalid"                  // 400: input rejected; details {field, reason}
	ReasonIdempotencyKeyRequired = "idempotency_key_required" // 400: a write without Idempotency-Key
	ReasonUnauthenticated        = "unauthenticated"          // 401: no credentials; details {header}
	ReasonTokenExpired           = "token_expired"            // 401: log in again
	ReasonTokenInvalid           = "token_invalid"            // 401: bad signature, malformed, other tenant
	ReasonTokenRevoked           = "token_revoked"            // 401: issued before a revocation, ban, password reset or suspension
	ReasonAPIKeyInvalid          = "api_key_invalid"          // 401: unknown or revoked tenant API key
	ReasonInvalidCredentials     = "invalid_credentials"      // 401: login refused (unknown login or wrong password)
	ReasonForbidden              = "forbidden"                // 403 without a more specific reason
	ReasonSignatureInvalid       = "signature_invalid"        // 403: a download URL's signature is bad or expired
	ReasonNotFound               = "not_found"                // 404: also an unknown route
	ReasonMethodNotAllowed       = "method_not_allowed"       // 405: the route exists for other methods; header Allow
	ReasonConflict               = "conflict"                 // 409: concurrent change; retryable
	ReasonInProgress             = "request_in_progress"      // 409: the same request is still running; retryable
	ReasonIdempotencyKeyReused   = "idempotency_key_reused"   // 409: the key was used with another request
	ReasonRequestTimeout         = "request_timeout"          // 408: an upload's body stopped arriving; retryable
	ReasonTooLarge               = "too_large"                // 413: body over the limit
	ReasonUnsupportedMediaType   = "unsupported_media_type"   // 415/406
	ReasonRateLimited            = "rate_limited"             // 429: Retry-After says when
	ReasonRetry                  = "retry"                    // 503: a dependency is down; retryable, Retry-After
	ReasonInternal               = "internal"                 // 500: anything else; no internal text
)

// MapError is the one mapping from errors to HTTP answers:
//
//	domain.ErrInvalid              → 400 invalid       details {field, reason[, detail]} from *domain.ValidationError
//	account.ErrInvalidCredentials  → 401 invalid_credentials
//	account.ErrInvalidAPIKey       → 401 api_key_invalid
//	auth.ErrTokenExpired           → 401 token_expired
//	auth.ErrTokenInvalid           → 401 token_invalid
//	account.ErrTokenRevoked        → 401 token_revoked
//	*domain.DeniedError            → 403 with the refusal's reason (e.g. not_member)
//	domain.ErrForbidden            → 403 forbidden
//	readmodels.ErrNotProvisioned   → 503 retry   details {retryable: true}, Retry-After: 1 (the tenant's database is missing)
//	domain.ErrNotFound             → 404 not_found
//	domain.ErrConcurrency          → 409 conflict              details {retryable: true}
//	domain.ErrInProgress           → 409 request_in_progress   details {retryable: true}
//	*domain.RateLimitedError       → 429 rate_limited  details {limit, retry_after_ms, retryable}, Retry-After
//	domain.ErrRetryable, context deadline or cancellation
//	                               → 503 retry   details {retryable: true}, Retry-After: 1
//	anything else                  → 500 internal, with a fixed message: internal text never reaches a client.
//
// An *Error passes through unchanged.
func MapError(ctx context.Context, err error) *Error { return mapError(RequestID(ctx), err) }

func mapError(requestID string, err error) *Error {
	var (
		e       *Error
		ve      *domain.ValidationError
		denied  *domain.DeniedError
		limited *domain.RateLimitedError
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
	case errors.Is(err, account.ErrInvalidCredentials):
		return unauthorized(requestID, ReasonInvalidCredentials, "unknown login or wrong password", nil)
	case errors.Is(err, account.ErrInvalidAPIKey):
		return unauthorized(requestID, ReasonAPIKeyInvalid, "unknown or revoked API key", map[string]any{"header": HeaderAPIKey})
	case errors.Is(err, auth.ErrTokenExpired):
		return unauthorized(requestID, ReasonTokenExpired, "the token has expired, log in again", nil)
	case errors.Is(err, auth.ErrTokenInvalid):
		return unauthorized(requestID, ReasonTokenInvalid, "the token is not valid here", nil)
	case errors.Is(err, account.ErrTokenRevoked):
		return unauthorized(requestID, ReasonTokenRevoked, "the token was revoked, log in again", nil)
	case errors.As(err, &denied):
		return newError(requestID, http.StatusForbidden, denied.Reason, "forbidden: "+denied.Reason, nil)
	case errors.Is(err, domain.ErrForbidden):
		return newError(requestID, http.StatusForbidden, ReasonForbidden, "forbidden", nil)
	case errors.Is(err, readmodels.ErrNotProvisioned):
		// The tenant passed the registry but its read model is missing: the server's fault, not
		// an unknown entity; the operator provisions it again.
		e := newError(requestID, http.StatusServiceUnavailable, ReasonRetry, "temporarily unavailable, retry", retry)
		e.headers.Set("Retry-After", "1")
		return e
	case errors.Is(err, domain.ErrNotFound):
		return newError(requestID, http.StatusNotFound, ReasonNotFound, "not found", nil)
	case errors.Is(err, domain.ErrConcurrency):
		return newError(requestID, http.StatusConflict, ReasonConflict, "concurrent modification, retry", retry)
	case errors.Is(err, domain.ErrInProgress):
		return newError(requestID, http.StatusConflict, ReasonInProgress, "the same request is in progress, retry", retry)
	case errors.As(err, &limited):
		e := newError(requestID, http.StatusTooManyRequests, ReasonRateLimited, "too many requests, slow down",
			map[string]any{"limit": string(limited.Limit), "retry_after_ms": limited.RetryAfterMillis(), "retryable": true})
		e.headers.Set("Retry-After", strconv.Itoa(limited.RetryAfterSeconds()))
		return e
	case errors.Is(err, domain.ErrRetryable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		e := newError(requestID, http.StatusServiceUnavailable, ReasonRetry, "temporarily unavailable, retry", retry)
		e.headers.Set("Retry-After", "1")
		return e
	}
	return newError(requestID, http.StatusInternalServerError, ReasonInternal, "internal error", nil)
}

// unauthorized builds a 401 answer with the WWW-Authenticate challenge.
func unauthorized(requestID, reason, message string, details map[string]any) *Error {
	e := newError(requestID, http.StatusUnauthorized, reason, message, details)
	e.headers.Set("WWW-Authenticate", `Bearer realm="imledger"`)
	return e
}
