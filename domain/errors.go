package domain

import (
	"errors"
	"fmt"
)

// Sentinel errors shared by every layer. Transport maps them to protocol codes and stable reasons.
var (
	// ErrInvalid marks bad input. Errors wrapping it are *ValidationError values.
	ErrInvalid = errors.New("invalid input")
	// ErrConcurrency means a stream already holds the version an append wanted to write.
	// The caller may reload and retry.
	ErrConcurrency = errors.New("concurrent modification")
	// ErrNotFound means the addressed entity does not exist.
	ErrNotFound = errors.New("not found")
	// ErrRetryable marks a transient failure (a dependency was unreachable); nothing was written
	// and the same request may be sent again.
	ErrRetryable = errors.New("temporarily unavailable")
	// ErrInProgress means an identical request is still being processed.
	ErrInProgress = errors.New("request in progress")
	// ErrForbidden means the actor may not do this; the wrapping *DeniedError carries the reason.
	ErrForbidden = errors.New("forbidden")
)

// ValidationError reports which field was rejected and a stable machine-readable reason.
type ValidationError struct {
	Field  string // the offending field, e.g. "client_msg_id"
	Reason string // stable snake_case reason, e.g. "required", "too_long"
	Detail string // human-readable detail
}

func (e *ValidationError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("invalid %s: %s: %s", e.Field, e.Reason, e.Detail)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

func invalid(field, reason, detail string) error {
	return &ValidationError{Field: field, Reason: reason, Detail: detail}
}

// DeniedError is a refused command with a stable reason such as "not_member".
type DeniedError struct {
	Reason string
}

func (e *DeniedError) Error() string { return "forbidden: " + e.Reason }

// Unwrap makes errors.Is(err, ErrForbidden) true.
func (e *DeniedError) Unwrap() error { return ErrForbidden }

// Deny returns a *DeniedError with the given stable reason.
func Deny(reason string) error { return &DeniedError{Reason: reason} }

// RetryableError wraps a transient cause; errors.Is(err, ErrRetryable) is true.
type RetryableError struct {
	Op  string
	Err error
}

func (e *RetryableError) Error() string {
	return e.Op + ": " + ErrRetryable.Error() + ": " + e.Err.Error()
}

// Unwrap exposes both ErrRetryable and the cause.
func (e *RetryableError) Unwrap() []error { return []error{ErrRetryable, e.Err} }

// Retryable wraps err as a *RetryableError for operation op.
func Retryable(op string, err error) error { return &RetryableError{Op: op, Err: err} }
