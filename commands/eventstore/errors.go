package eventstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/imledger/imledger/domain"
)

// PostgreSQL error codes the store reacts to.
const (
	codeUniqueViolation = "23505"
	codeSerialization   = "40001"
	codeDeadlock        = "40P01"
	codeLockNotAvail    = "55P03"
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

// isTransient reports whether err is worth retrying unchanged.
func isTransient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeSerialization, codeDeadlock, codeLockNotAvail:
			return true
		}
		// 08: connection exception, 53: insufficient resources, 57: operator intervention.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "53") ||
			strings.HasPrefix(pgErr.Code, "57")
	}
	var (
		connectErr *pgconn.ConnectError
		netErr     net.Error
	)
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err)
}

// uniqueViolation returns the violated constraint name when err is a unique violation.
func uniqueViolation(err error) (constraint string, ok bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeUniqueViolation {
		return pgErr.ConstraintName, true
	}
	return "", false
}

// invalid returns a *domain.ValidationError, which wraps domain.ErrInvalid.
func invalid(field, reason, detail string) error {
	return &domain.ValidationError{Field: field, Reason: reason, Detail: detail}
}
