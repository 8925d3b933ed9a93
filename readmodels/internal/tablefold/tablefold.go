// Package tablefold is what the small read models kept in a fixed set of MySQL tables of each
// tenant's database (pushdb, tokendb, filedb) do alike: fold a batch of events into the tables in
// one transaction, summarise the tables for a verification, and create, swap and drop the
// suffixed copies a rebuild fills. Each read model keeps what is its own, its Tables type, its
// statements and how it decodes its events, and describes itself once as a Model.
package tablefold

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/internal/eventdecode"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Router finds a tenant's database (tenantdb.Router).
type Router interface {
	DB(ctx context.Context, tenant domain.TenantID) (*sql.DB, error)
}

// Tables is the constraint on a read model's Tables type: its names with a suffix appended.
type Tables[T any] interface {
	WithSuffix(s string) T
}

// Op is what one event of a batch does to the tables: one statement (Stmt with Args), counted
// when it changes a row, or a write of the read model's own (Run, which returns how many it
// changed). An Op with neither is an event the read model ignores.
type Op struct {
	Stmt string
	Args []any
	Run  func(ctx context.Context, tx *sql.Tx) (int, error)
}

// Model is a read model whose tables T names.
type Model[T Tables[T]] struct {
	// Pkg is the read model's package name; it prefixes the errors, e.g. "pushdb".
	Pkg string
	// Live is the live tables, as the migrations create them.
	Live T
	// Names lists the names of a T in a fixed order; a pair is the names at one index.
	Names func(T) []string
	// Decode returns the decoder of the events of a batch applied to the tables it is given,
	// called with each event's index in the batch (eventdecode.Batch).
	Decode func(T) func(i int, env domain.Envelope) (Op, error)
	// Columns are, for each name of Names, the columns the table's checksum hashes.
	Columns []string
	// PreLog says the tables hold rows older than the log (version 0), which no event
	// rebuilds: fresh copies get them before the events are applied.
	PreLog bool
}

// Validate checks the names of t (tableset.Validate).
func (m Model[T]) Validate(t T) error { return tableset.Validate(m.Pkg, m.Names(t)) }

// Tables returns the live tables with suffix appended to every name ("" is the live tables).
func (m Model[T]) Tables(suffix string) T { return m.Live.WithSuffix(suffix) }

// Apply folds one tenant's events into tables in one transaction and returns how many changed
// something; events the read model ignores change nothing. A batch of one statement (a write
// right after its event) is one round trip, without a transaction.
//
// Errors: an *readmodels.EventError wrapping domain.ErrInvalid for an event that can never be
// applied; domain.ErrNotFound (wrapped) for a tenant without a database; domain.ErrRetryable
// when MySQL is unreachable.
func (m Model[T]) Apply(ctx context.Context, r Router, tenant domain.TenantID, tables T, events []domain.Envelope) (n int, err error) {
	if err := m.Validate(tables); err != nil {
		return 0, err
	}
	ops, err := eventdecode.Batch(tenant, events, m.Decode(tables), func(i int, id uuid.UUID, err error) error {
		return &readmodels.EventError{Index: i, EventID: id, Err: err}
	})
	if err != nil {
		return 0, fmt.Errorf("%s: apply: %w", m.Pkg, err)
	}
	// Events the read model ignores (files-refs sees every sent message, most without files)
	// cost no round trip: a batch of them never opens a transaction.
	ops = slices.DeleteFunc(ops, func(o Op) bool { return o.Stmt == "" && o.Run == nil })
	if len(ops) == 0 {
		return 0, nil
	}
	db, err := r.DB(ctx, tenant)
	if err != nil {
		return 0, fmt.Errorf("%s: apply: %w", m.Pkg, err)
	}
	if len(ops) == 1 && ops[0].Stmt != "" {
		return m.exec(ctx, db, ops[0])
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, tenantdb.WrapErr(m.Pkg+": apply: begin", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	for _, o := range ops {
		var k int
		switch {
		case o.Stmt != "":
			k, err = m.exec(ctx, tx, o)
		case o.Run != nil:
			k, err = o.Run(ctx, tx)
		}
		if err != nil {
			return 0, err
		}
		n += k
	}
	if err := tx.Commit(); err != nil {
		return 0, tenantdb.WrapErr(m.Pkg+": apply: commit", err)
	}
	return n, nil
}

// exec runs the statement of o and returns 1 when it changed a row.
func (m Model[T]) exec(ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, o Op) (int, error) {
	res, err := db.ExecContext(ctx, o.Stmt, o.Args...)
	if err != nil {
		return 0, tenantdb.WrapErr(m.Pkg+": apply", err)
	}
	if k, _ := res.RowsAffected(); k > 0 {
		return 1, nil
	}
	return 0, nil
}

// Checksum summarises each table of tables, in the order of Names, so two copies (the live
// tables and a rebuild) can be compared (tableset.Summarize over Columns).
func (m Model[T]) Checksum(ctx context.Context, r Router, tenant domain.TenantID, tables T) ([]readmodels.TableSummary, error) {
	if err := m.Validate(tables); err != nil {
		return nil, err
	}
	db, err := r.DB(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("%s: checksum: %w", m.Pkg, err)
	}
	names := m.Names(tables)
	sums := make([]readmodels.TableSummary, len(names))
	for i, name := range names {
		if sums[i], err = tableset.Summarize(ctx, db, m.Pkg, name, m.Columns[i]); err != nil {
			return nil, err
		}
	}
	return sums, nil
}

// CreateLike creates the tables with suffix in db like the live ones, without rows, dropping
// tables of those names left by an interrupted run first; with PreLog it copies the live rows
// older than the log into them.
func (m Model[T]) CreateLike(ctx context.Context, db *sql.DB, suffix string) error {
	live, fresh := m.Names(m.Live), m.Names(m.Tables(suffix))
	if err := tableset.Drop(ctx, db, m.Pkg, fresh); err != nil {
		return fmt.Errorf("drop leftover tables: %w", err)
	}
	if err := tableset.CreateLike(ctx, db, m.Pkg, live, fresh); err != nil {
		return err
	}
	if !m.PreLog {
		return nil
	}
	return m.carryPreLogRows(ctx, db, live, fresh)
}

// carryPreLogRows copies the version-0 rows of each live table into its fresh copy, before the
// events are applied to it: they are in no stream.
func (m Model[T]) carryPreLogRows(ctx context.Context, db *sql.DB, live, fresh []string) error {
	if err := tableset.Validate(m.Pkg, append(append([]string(nil), live...), fresh...)); err != nil {
		return err
	}
	for i, l := range live {
		q := "INSERT INTO " + tableset.Quote(fresh[i]) + " SELECT * FROM " + tableset.Quote(l) + " WHERE version = 0"
		if _, err := db.ExecContext(ctx, q); err != nil {
			return tenantdb.WrapErr(m.Pkg+": carry rows over", err)
		}
	}
	return nil
}

// Drop drops the tables with suffix that exist.
func (m Model[T]) Drop(ctx context.Context, db *sql.DB, suffix string) error {
	return tableset.Drop(ctx, db, m.Pkg, m.Names(m.Tables(suffix)))
}

// Swap puts the tables with suffix in place of the live ones with one RENAME TABLE and drops the
// old ones (tableset.Swap).
func (m Model[T]) Swap(ctx context.Context, db *sql.DB, suffix string) error {
	return tableset.Swap(ctx, db, m.Pkg, m.Names(m.Live), m.Names(m.Tables(suffix)))
}
