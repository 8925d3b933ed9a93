package group

import (
	"context"
	"errors"

	"github.com/imledger/imledger/domain"
)

// ConflictError is a command that lost a race which must not be papered over by a retry: the
// state the command was decided on (the target's membership, the actor's own role) changed
// between the load and the append, so deciding again could act on a user the caller never saw
// in that state. An ownership transfer that races the removal of the new owner ends with one
// winner and a ConflictError for the other. It wraps the store's domain.ErrConcurrency error,
// so transport answers 409 conflict, retryable: the caller looks again and decides.
type ConflictError struct {
	Op  string // the command, e.g. "transfer ownership"
	Err error  // the lost append; wraps domain.ErrConcurrency
}

// Error names the command and the lost append.
func (e *ConflictError) Error() string {
	return e.Op + ": the state it was decided on changed concurrently: " + e.Err.Error()
}

// Unwrap returns the lost append's error.
func (e *ConflictError) Unwrap() error { return e.Err }

// retryable returns err unchanged when it already says what it is (bad input, refusal, not
// found, lost race, retryable, cancelled); any other store failure becomes a
// *domain.RetryableError for op.
func retryable(op string, err error) error {
	switch {
	case errors.Is(err, domain.ErrRetryable), errors.Is(err, domain.ErrInvalid),
		errors.Is(err, domain.ErrForbidden), errors.Is(err, domain.ErrNotFound),
		errors.Is(err, domain.ErrConcurrency), errors.Is(err, domain.ErrStreamMismatch),
		errors.Is(err, context.Canceled):
		return err
	}
	return domain.Retryable(op, err)
}
