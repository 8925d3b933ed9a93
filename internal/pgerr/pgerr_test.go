package pgerr_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/imledger/imledger/internal/pgerr"
	"github.com/imledger/imledger/internal/testenv"
)

func pg(code string) error {
	return fmt.Errorf("op: %w", &pgconn.PgError{Code: code, ConstraintName: "k"})
}

func TestTransient(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{pg("08006"), true}, // connection failure
		{pg("40001"), true}, // serialization failure
		{pg("40P01"), true}, // deadlock
		{pg("53300"), true}, // too many connections
		{pg("57P01"), true}, // admin shutdown
		{pg("55P03"), true}, // lock not available
		{pg("23505"), false},
		{pg("22021"), false}, // bad UTF-8
		{pg("42P01"), false}, // undefined table
		{io.ErrUnexpectedEOF, true},
		{pgx.ErrNoRows, false},
		{errors.New("scan: cannot convert"), false},
	} {
		if got := pgerr.Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestTransientOnARealServer: what the real server and driver return when the database is out of
// reach and when a statement is refused.
func TestTransientOnARealServer(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	conn, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=1")
	if err == nil {
		_ = conn.Close(ctx)
		t.Fatal("connected to port 1")
	}
	if !pgerr.Transient(err) {
		t.Errorf("a refused connection is not transient: %v", err)
	}
	db, err := pgx.Connect(ctx, testenv.PostgresURL)
	if err != nil {
		t.Fatalf("PostgreSQL is not reachable at %s: %v (start it, see .ci/run)", testenv.PostgresURL, err)
	}
	defer db.Close(ctx)
	_, err = db.Exec(ctx, "SELECT 1/0")
	if pgerr.Transient(err) || !pgerr.Class(err, "22") || pgerr.Code(err) != "22012" {
		t.Errorf("division by zero: transient %v, class 22 %v, code %q", pgerr.Transient(err), pgerr.Class(err, "22"), pgerr.Code(err))
	}
	if _, ok := pgerr.Unique(err); ok {
		t.Error("division by zero taken for a unique violation")
	}
}

func TestUniqueAndClass(t *testing.T) {
	t.Parallel()
	if c, ok := pgerr.Unique(pg("23505")); !ok || c != "k" {
		t.Errorf("Unique = %q, %v", c, ok)
	}
	if _, ok := pgerr.Unique(pg("23503")); ok {
		t.Error("a foreign-key violation taken for a unique one")
	}
	if !pgerr.Class(pg("23503"), "22", "23") || pgerr.Class(pg("42P01"), "22", "23") || pgerr.Class(errors.New("x"), "22") {
		t.Error("Class")
	}
	if pgerr.Code(errors.New("x")) != "" {
		t.Error("Code of a non-server error")
	}
}
