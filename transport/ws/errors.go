package ws

import (
	"context"
	"errors"
	"net/http"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/transport/auth"
)

// Stable reasons of error ctrl frames. Clients may switch on them; they are never renamed.
const (
	ReasonBadFrame             = "bad_frame"             // 400: not a JSON object with exactly one known key, or a field of the wrong type
	ReasonUnknownFrame         = "unknown_frame"         // 400: a frame type this server does not know
	ReasonInvalid              = "invalid"               // 400: input rejected; params {field, reason[, detail]}
	ReasonFrameTooLarge        = "frame_too_large"       // 413: the message exceeded MaxFrameSize; the connection closes with 1009
	ReasonNotAuthenticated     = "not_authenticated"     // 401: the frame needs a login first
	ReasonTokenInvalid         = "token_invalid"         // 401: login with a bad token
	ReasonTokenExpired         = "token_expired"         // 401: login with an expired token, or the session's token expired
	ReasonAlreadyAuthenticated = "already_authenticated" // 409: login as another user on a logged-in session
	ReasonNotMember            = "not_member"            // 403: the user may not read or post to the topic
	ReasonTooManyTopics        = "too_many_topics"       // 400: MaxTopicsPerSession reached
	ReasonNotFound             = "not_found"             // 404
	ReasonConflict             = "conflict"              // 409: concurrent change; retry
	ReasonInProgress           = "in_progress"           // 409: an identical pub is still being processed; retry
	ReasonRateLimited          = "rate_limited"          // 429: over a rate limit; nothing was written; params {limit, retry_after_ms}
	ReasonRetry                = "retry"                 // 503: a dependency is unavailable; nothing was written; retry
	ReasonNotImplemented       = "not_implemented"       // 501: this node does not serve the frame
	ReasonInternal             = "internal"              // 500: anything else; no internal text
)

// errCtrl builds the error answer to frame id with a fixed reason.
func errCtrl(id string, code int, reason, text string) ctrl {
	return ctrl{ID: id, Code: code, Text: text, Reason: reason}
}

// mapError is the one mapping from errors to ctrl frames:
//
//	*domain.ValidationError   → 400 invalid           params {field, reason[, detail]}
//	*domain.DeniedError       → 403 <its reason>      e.g. not_member
//	auth.ErrTokenExpired      → 401 token_expired
//	account.ErrTokenRevoked   → 401 token_revoked
//	auth.ErrTokenInvalid      → 401 token_invalid
//	readmodels.ErrNotProvisioned → 503 retry          params {retryable: true} (the tenant's database is missing)
//	domain.ErrNotFound        → 404 not_found
//	domain.ErrInProgress      → 409 in_progress       params {retryable: true}
//	domain.ErrConcurrency     → 409 conflict          params {retryable: true}
//	*domain.RateLimitedError  → 429 rate_limited      params {limit, retry_after_ms, retryable: true}
//	domain.ErrRetryable, context deadline or cancellation
//	                          → 503 retry             params {retryable: true}
//	anything else             → 500 internal, with a fixed text: internal text never reaches a client.
func mapError(id string, err error) ctrl {
	var (
		ve      *domain.ValidationError
		denied  *domain.DeniedError
		limited *domain.RateLimitedError
	)
	retry := map[string]any{"retryable": true}
	switch {
	case errors.As(err, &ve):
		p := map[string]any{"field": ve.Field, "reason": ve.Reason}
		if ve.Detail != "" {
			p["detail"] = ve.Detail
		}
		c := errCtrl(id, http.StatusBadRequest, ReasonInvalid, ve.Error())
		c.Params = p
		return c
	case errors.Is(err, domain.ErrInvalid):
		return errCtrl(id, http.StatusBadRequest, ReasonInvalid, "invalid input")
	case errors.As(err, &denied):
		return errCtrl(id, http.StatusForbidden, denied.Reason, "forbidden")
	case errors.Is(err, domain.ErrForbidden):
		return errCtrl(id, http.StatusForbidden, ReasonNotMember, "forbidden")
	case errors.Is(err, auth.ErrTokenExpired):
		return errCtrl(id, http.StatusUnauthorized, ReasonTokenExpired, "token expired")
	case errors.Is(err, account.ErrTokenRevoked):
		return errCtrl(id, http.StatusUnauthorized, ReasonTokenRevoked, "token revoked, login again")
	case errors.Is(err, auth.ErrTokenInvalid):
		return errCtrl(id, http.StatusUnauthorized, ReasonTokenInvalid, "token invalid")
	case errors.Is(err, readmodels.ErrNotProvisioned): // the tenant's read model is missing: the server's fault
		c := errCtrl(id, http.StatusServiceUnavailable, ReasonRetry, "temporarily unavailable, retry")
		c.Params = retry
		return c
	case errors.Is(err, domain.ErrNotFound):
		return errCtrl(id, http.StatusNotFound, ReasonNotFound, "not found")
	case errors.Is(err, domain.ErrInProgress):
		c := errCtrl(id, http.StatusConflict, ReasonInProgress, "an identical request is in progress, retry")
		c.Params = retry
		return c
	case errors.Is(err, domain.ErrConcurrency):
		c := errCtrl(id, http.StatusConflict, ReasonConflict, "concurrent modification, retry")
		c.Params = retry
		return c
	case errors.As(err, &limited):
		c := errCtrl(id, http.StatusTooManyRequests, ReasonRateLimited, "too many requests, slow down")
		c.Params = map[string]any{"limit": string(limited.Limit), "retry_after_ms": limited.RetryAfterMillis(), "retryable": true}
		return c
	case errors.Is(err, domain.ErrRetryable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		c := errCtrl(id, http.StatusServiceUnavailable, ReasonRetry, "temporarily unavailable, retry")
		c.Params = retry
		return c
	}
	return errCtrl(id, http.StatusInternalServerError, ReasonInternal, "internal error")
}
