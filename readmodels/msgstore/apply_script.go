package msgstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// A live projector's batch is small (one event per Kafka partition in flight), and the
// projector waits for its commit before the partition's next event is handed over, so the
// round trips of a batch bound the projection's throughput: BEGIN, the messages, the read marks
// and COMMIT are one each. MariaDB runs a compound statement
// (BEGIN NOT ATOMIC … END) sent as one query, so applyScript sends everything up to the commit
// in one round trip and COMMIT in a second.

// Server errors that mean the server does not take the compound statement (MySQL answers
// BEGIN NOT ATOMIC with a syntax error); the Store then writes statement by statement.
const (
	errParse         = 1064 // ER_PARSE_ERROR
	errUnsupportedPS = 1295 // ER_UNSUPPORTED_PS: the driver tried to prepare it
)

// maxScriptBytes bounds the content a scripted batch carries, well under max_allowed_packet.
const maxScriptBytes = 4 << 20

// maxScriptOps bounds the events of a scripted batch.
const maxScriptOps = 500

// errNoScript sends a batch the statement-by-statement way.
var errNoScript = errors.New("msgstore: batch not scripted")

// applyScript writes ops in one compound statement that starts a transaction and runs every
// insert and upsert of the batch, asks ok, and commits. It returns errNoScript, having written
// nothing, when the batch holds recalls or edits (their affected-row counts are needed), is
// larger than maxScriptOps or maxScriptBytes, when the server does not take compound statements,
// and when the script failed other than transiently: a value the server refuses is then
// handled, row by row, by the statement-by-statement way.
//
// The transaction runs at the session's isolation level, not READ COMMITTED as Apply's: a
// script only inserts rows and upserts rows by their primary key, and InnoDB takes the same
// locks for those at either level (gap locks only for duplicate-key checks, which it takes at
// both).
func (s *Store) applyScript(ctx context.Context, db *sql.DB, tables Tables, ops []op, ok func(context.Context) error) (n int, err error) {
	if s.noScripts.Load() || len(ops) > maxScriptOps {
		return 0, errNoScript
	}
	stmts, scriptable := scriptStmts(tables, ops)
	if !scriptable {
		return 0, errNoScript
	}
	query, args := compound(stmts)
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, tenantdb.WrapErr("apply: connection", err)
	}
	defer conn.Close()
	committed := false
	defer func() {
		if !committed {
			rollback(ctx, conn)
		}
	}()
	if _, err := conn.ExecContext(ctx, query, args...); err != nil {
		switch {
		case tenantdb.IsMySQLError(err, errParse) || tenantdb.IsMySQLError(err, errUnsupportedPS):
			s.noScripts.Store(true)
			return 0, errNoScript
		case tenantdb.IsTransient(err) || ctx.Err() != nil:
			return 0, tenantdb.WrapErr("apply", err)
		default:
			return 0, errNoScript
		}
	}
	if ok != nil {
		if err := ok(ctx); err != nil {
			return 0, err
		}
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return 0, tenantdb.WrapErr("apply: commit", err)
	}
	committed = true
	s.scripted.Add(1)
	return len(ops), nil
}

// scriptStmts returns the statements that write ops and whether every op can be written without
// looking at a statement's result.
func scriptStmts(tables Tables, ops []op) ([]stmt, bool) {
	var stmts []stmt
	bytes := 0
	for _, g := range groupOps(ops) {
		switch g.action {
		case domain.ActionSent:
			for _, o := range g.ops {
				bytes += len(o.sent.Content)
			}
			grp, direct, marks := sentParts(g.ops)
			stmts = append(stmts, messageStmts(tables.GroupMessages, groupColumns, grp, groupRow)...)
			stmts = append(stmts, messageStmts(tables.DirectMessages, directColumns, direct, directRow)...)
			stmts = append(stmts, markStmts(tables.ReadMarks, marks)...)
		case domain.ActionReadMarked:
			stmts = append(stmts, markStmts(tables.ReadMarks, readMarkRows(g.ops))...)
		case domain.ActionDeleted:
			stmts = append(stmts, deletionStmts(tables.Deletions, g.ops)...)
		case domain.ActionSeqSkipped:
			stmts = append(stmts, markerStmts(tables, g.ops)...)
		default:
			return nil, false
		}
	}
	stmts = append(stmts, watermarkStmts(tables, ops, readmodels.Millis(time.Now()))...)
	return stmts, bytes <= maxScriptBytes
}

// compound joins stmts into one compound statement that first starts a transaction.
func compound(stmts []stmt) (string, []any) {
	var b strings.Builder
	var args []any
	b.WriteString("BEGIN NOT ATOMIC START TRANSACTION; ")
	for _, st := range stmts {
		b.WriteString(st.Query)
		b.WriteString("; ")
		args = append(args, st.Args...)
	}
	b.WriteString("END")
	return b.String(), args
}

// rollback ends the transaction a failed script may have left open. A connection that cannot
// roll back is discarded rather than returned to the pool mid-transaction.
func rollback(ctx context.Context, conn *sql.Conn) {
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}
