package eventstore

import (
	"fmt"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/pgerr"
)

// Names of the unique constraints of the events table (migrations/postgres/00001_events.sql).
const (
	constraintStreamVersion  = "events_stream_version_key"
	constraintIdempotencyKey = "events_idempotency_key"
	constraintEventID        = "events_event_id_key"
)

// wrapErr prefixes err with the operation name op. Transient failures (the database was
// unreachable, a timeout, a deadlock or serialisation failure, a server shutting down) become
// *domain.RetryableError values; a cancelled context stays a plain wrapped error.
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if isTransient(err) {
		return domain.Retryable(op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isTransient reports whether err is worth retrying unchanged (internal/pgerr).
func isTransient(err error) bool { return pgerr.Transient(err) }

// uniqueViolation returns the violated constraint name when err is a unique violation.
func uniqueViolation(err error) (constraint string, ok bool) { return pgerr.Unique(err) }

// invalid returns a *domain.ValidationError, which wraps domain.ErrInvalid.
func invalid(field, reason, detail string) error {
	return &domain.ValidationError{Field: field, Reason: reason, Detail: detail}
}
