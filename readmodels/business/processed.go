package business

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// maxConsumerGroupLen is the width of im_processed_events.consumer_group.
const maxConsumerGroupLen = 128

// processedChunk is the most processed rows one statement inserts or looks up.
const processedChunk = 500

// errDuplicateKey is ER_DUP_ENTRY.
const errDuplicateKey = 1062

// markProcessed records the processed rows of ops and returns the ops not recorded before. The
// common case, a batch seen for the first time, costs one multi-row INSERT; only when that hits a
// duplicate (a redelivery) does it read which events were done and insert the rest. InnoDB undoes
// just the failed statement, so the transaction carries on. Batches larger than one statement
// read first, so no earlier statement's rows can be mistaken for old ones.
func markProcessed(ctx context.Context, tx *sql.Tx, table, group string, ops []op) ([]op, error) {
	if len(ops) <= processedChunk {
		err := insertProcessed(ctx, tx, table, group, ops)
		if err == nil {
			return ops, nil
		}
		if !tenantdb.IsMySQLError(err, errDuplicateKey) {
			return nil, tenantdb.WrapErr("apply: record processed events", err)
		}
	}
	done, err := processedAmong(ctx, tx, table, group, ops)
	if err != nil {
		return nil, err
	}
	fresh := make([]op, 0, len(ops))
	for _, o := range ops {
		if !done[o.env.EventID] {
			fresh = append(fresh, o)
		}
	}
	err = insertProcessed(ctx, tx, table, group, fresh)
	if tenantdb.IsMySQLError(err, errDuplicateKey) {
		// Another Apply recorded the same event after our read: retrying sees it as done.
		return nil, domain.Retryable("apply: record processed events", err)
	}
	if err != nil {
		return nil, tenantdb.WrapErr("apply: record processed events", err)
	}
	return fresh, nil
}

// insertProcessed inserts one processed row per op.
func insertProcessed(ctx context.Context, tx *sql.Tx, table, group string, ops []op) error {
	now := time.Now().UTC()
	for start := 0; start < len(ops); start += processedChunk {
		chunk := ops[start:min(start+processedChunk, len(ops))]
		args := make([]any, 0, 3*len(chunk))
		for _, o := range chunk {
			args = append(args, group, o.env.EventID[:], now)
		}
		stmt := "INSERT INTO " + q(table) + " (consumer_group, event_id, processed_at) VALUES " + rowPlaceholders(len(chunk), 3)
		if _, err := tx.ExecContext(ctx, stmt, args...); err != nil {
			return err
		}
	}
	return nil
}

// processedAmong returns which of ops are recorded as processed for group.
func processedAmong(ctx context.Context, tx *sql.Tx, table, group string, ops []op) (map[uuid.UUID]bool, error) {
	done := make(map[uuid.UUID]bool, len(ops))
	for start := 0; start < len(ops); start += processedChunk {
		chunk := ops[start:min(start+processedChunk, len(ops))]
		args := make([]any, 0, len(chunk)+1)
		args = append(args, group)
		for _, o := range chunk {
			args = append(args, o.env.EventID[:])
		}
		stmt := "SELECT event_id FROM " + q(table) + " WHERE consumer_group = ? AND event_id IN (" + placeholders(len(chunk)) + ")"
		if err := scanIDs(ctx, tx, stmt, args, done); err != nil {
			return nil, err
		}
	}
	return done, nil
}

func scanIDs(ctx context.Context, tx *sql.Tx, stmt string, args []any, done map[uuid.UUID]bool) error {
	rows, err := tx.QueryContext(ctx, stmt, args...)
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

// placeholders returns "?, ?, …" with n marks.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// rowPlaceholders returns n rows of width marks: "(?, ?), (?, ?)".
func rowPlaceholders(n, width int) string {
	row := "(" + placeholders(width) + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}
