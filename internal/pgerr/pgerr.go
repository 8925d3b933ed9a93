// Package pgerr is the one place that says what a PostgreSQL error means: worth trying again
// unchanged (Transient), of an SQLSTATE class (Class: "22" data the server refuses, "23" an
// integrity constraint), or a unique violation of which constraint (Unique). Every package that
// talks to PostgreSQL asks it rather than reading SQLSTATE codes of its own, so a failure is
// retried, refused or reported the same way on every path.
package pgerr

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLSTATE codes with a meaning of their own.
const (
	UniqueViolation   = "23505"
	DuplicateDatabase = "42P04"
	UnknownDatabase   = "3D000" // invalid_catalog_name
	lockNotAvailable  = "55P03"
)

// transientClasses are the SQLSTATE classes of a failure that trying again can cure:
// 08 connection exception, 40 transaction rollback (serialization failure, deadlock),
// 53 insufficient resources, 57 operator intervention (a server shutting down or restarting).
var transientClasses = []string{"08", "40", "53", "57"}

// Transient reports whether err is worth retrying unchanged: the server was unreachable or went
// away, a timeout, a transaction rolled back by a serialization failure or deadlock, a lock not
// available, a server out of resources or shutting down. A cancelled context is not: its caller
// gave up. Any other error the server answered with is not either.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == lockNotAvailable || Class(err, transientClasses...)
	}
	var (
		connectErr *pgconn.ConnectError
		netErr     net.Error
	)
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err)
}

// Class reports whether err is an error the server answered with, of one of the SQLSTATE
// classes (the first two characters of its code).
func Class(err error, classes ...string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	for _, c := range classes {
		if strings.HasPrefix(pgErr.Code, c) {
			return true
		}
	}
	return false
}

// Code is err's SQLSTATE code, or "" when the server did not answer with an error.
func Code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// Unique returns the violated constraint's name when err is a unique violation.
func Unique(err error) (constraint string, ok bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == UniqueViolation {
		return pgErr.ConstraintName, true
	}
	return "", false
}
