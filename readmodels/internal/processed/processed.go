// Package processed records which events a read model has applied, one row per consumer group
// and event id in a processed-events table (im_processed_events, or a rebuild's copy of it), so
// that a redelivered event is skipped. The read models share the table and how it is written;
// only the type of their decoded events differs, so the functions here take the events as they
// are and a function that returns an event's id.
package processed

import (
	"context"
	"database/sql"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// MaxGroupLen is the width of im_processed_events.consumer_group.
const MaxGroupLen = 128

// Chunk is the most processed rows one statement inserts or looks up.
const Chunk = 500

// Stmt is one SQL statement and its arguments.
type Stmt struct {
	Query string
	Args  []any
}

// Mark records the processed rows of items for group in table and returns the items not recorded
// before, in order. The common case, a batch seen for the first time, costs one multi-row INSERT;
// only when that hits a duplicate (a redelivery) does it read which events were done and insert
// the rest. InnoDB undoes just the failed statement, so the transaction carries on. Batches
// larger than one statement read first, so no earlier statement's rows can be mistaken for old
// ones. A duplicate on the second insert means another writer recorded the event after the read;
// it wraps domain.ErrRetryable, since a retry sees the event as done.
func Mark[T any](ctx context.Context, tx *sql.Tx, table, group string, items []T, id func(T) uuid.UUID) ([]T, error) {
	if len(items) <= Chunk {
		err := insert(ctx, tx, table, group, items, id)
		if err == nil {
			return items, nil
		}
		if !tenantdb.IsMySQLError(err, tenantdb.ErrDupEntry) {
			return nil, tenantdb.WrapErr("apply: record processed events", err)
		}
	}
	done, err := among(ctx, tx, table, group, items, id)
	if err != nil {
		return nil, err
	}
	fresh := make([]T, 0, len(items))
	for _, it := range items {
		if !done[id(it)] {
			fresh = append(fresh, it)
		}
	}
	err = insert(ctx, tx, table, group, fresh, id)
	if tenantdb.IsMySQLError(err, tenantdb.ErrDupEntry) {
		return nil, domain.Retryable("apply: record processed events", err)
	}
	if err != nil {
		return nil, tenantdb.WrapErr("apply: record processed events", err)
	}
	return fresh, nil
}

// InsertStmts returns the INSERTs of one processed row per item, Chunk rows a statement, for a
// caller that runs them some other way than Mark (msgstore sends them inside a compound
// statement).
func InsertStmts[T any](table, group string, items []T, id func(T) uuid.UUID) []Stmt {
	now := time.Now().UTC()
	var out []Stmt
	for start := 0; start < len(items); start += Chunk {
		chunk := items[start:min(start+Chunk, len(items))]
		args := make([]any, 0, 3*len(chunk))
		for _, it := range chunk {
			u := id(it)
			args = append(args, group, u[:], now)
		}
		out = append(out, Stmt{Query: "INSERT INTO " + tableset.Quote(table) + " (consumer_group, event_id, processed_at) VALUES " +
			tableset.RowPlaceholders(len(chunk), 3), Args: args})
	}
	return out
}

// insert runs InsertStmts and returns the server's error as it is, so Mark can tell a duplicate.
func insert[T any](ctx context.Context, tx *sql.Tx, table, group string, items []T, id func(T) uuid.UUID) error {
	for _, st := range InsertStmts(table, group, items, id) {
		if _, err := tx.ExecContext(ctx, st.Query, st.Args...); err != nil {
			return err
		}
	}
	return nil
}

// among returns which of items are recorded as processed for group.
func among[T any](ctx context.Context, tx *sql.Tx, table, group string, items []T, id func(T) uuid.UUID) (map[uuid.UUID]bool, error) {
	done := make(map[uuid.UUID]bool, len(items))
	for start := 0; start < len(items); start += Chunk {
		chunk := items[start:min(start+Chunk, len(items))]
		args := make([]any, 0, len(chunk)+1)
		args = append(args, group)
		for _, it := range chunk {
			u := id(it)
			args = append(args, u[:])
		}
		query := "SELECT event_id FROM " + tableset.Quote(table) + " WHERE consumer_group = ? AND event_id IN (" +
			tableset.Placeholders(len(chunk)) + ")"
		if err := scanIDs(ctx, tx, query, args, done); err != nil {
			return nil, err
		}
	}
	return done, nil
}

// scanIDs adds the event ids query returns to done.
func scanIDs(ctx context.Context, tx *sql.Tx, query string, args []any, done map[uuid.UUID]bool) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return tenantdb.WrapErr("apply: read processed events", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id []byte
		if err := rows.Scan(&id); err != nil {
			return tenantdb.WrapErr("apply: read processed events", err)
		}
		if u, err := uuid.FromBytes(id); err == nil {
			done[u] = true
		}
	}
	return tenantdb.WrapErr("apply: read processed events", rows.Err())
}
