package eventstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/domain"
)

// Cursor is a point in the commit-safe order of the events table: the writing transaction's
// id (xid8) and the event's position. The zero Cursor is before every event.
type Cursor struct {
	TxID     uint64
	Position int64
}

// Before reports whether c comes before o in the commit-safe order.
func (c Cursor) Before(o Cursor) bool {
	return c.TxID < o.TxID || c.TxID == o.TxID && c.Position < o.Position
}

// Record is an event read by ReadCommitted with the cursor just past it.
type Record struct {
	Cursor   Cursor
	Envelope domain.Envelope
}

// readCommittedSQL is the watermill-sql v4 tail: rows after the cursor in (tx_id, position)
// order, limited to transactions older than every transaction still running. A transaction
// that took its id early and commits late therefore holds the tail back instead of being skipped.
const readCommittedSQL = `SELECT tx_id, ` + envelopeColumns + ` FROM events
WHERE (tx_id, position) > ($1::xid8, $2::bigint)
  AND tx_id < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY tx_id, position
LIMIT $3`

// ReadCommitted returns up to limit events after the cursor in (tx_id, position) order, never
// one of a transaction that may still be running (limit <= 0 or above Config.MaxRead means
// MaxRead). Saving the last record's Cursor and reading on from it visits every committed event
// exactly once, even when transactions commit out of position order. The horizon is the oldest
// transaction id still running anywhere in the PostgreSQL cluster, so any long transaction that
// wrote something (in any database of the cluster) delays the tail until it ends.
// Errors: domain.ErrRetryable when PostgreSQL was unreachable or timed out.
func (s *Store) ReadCommitted(ctx context.Context, after Cursor, limit int) ([]Record, error) {
	const op = "read committed events"
	rows, err := s.pool.Query(ctx, readCommittedSQL, after.TxID, after.Position, s.cfg.limit(limit))
	if err != nil {
		return nil, wrapErr(op, err)
	}
	defer rows.Close()
	var (
		out []Record
		sc  envelopeScanner
	)
	for rows.Next() {
		var txID uint64
		e, err := sc.scan(rows, &txID)
		if err != nil {
			return nil, wrapErr(op, err)
		}
		out = append(out, Record{Cursor: Cursor{TxID: txID, Position: e.Position}, Envelope: e})
	}
	if err := rows.Err(); err != nil {
		return nil, wrapErr(op, err)
	}
	return out, nil
}

// LastCursor returns the cursor of the last event in the commit-safe order, the zero Cursor when
// there is none: a relay whose cursor reached it has published every event committed before the
// call. It need not be the event with the highest position: a transaction may take its id
// before another and its positions after it. Errors: domain.ErrRetryable when PostgreSQL was
// unreachable or timed out.
func (s *Store) LastCursor(ctx context.Context) (Cursor, error) {
	return s.queryCursor(ctx, "read the last cursor",
		`SELECT tx_id, position FROM events ORDER BY tx_id DESC, position DESC LIMIT 1`)
}

// LoadCheckpoint returns the cursor saved under name, or the zero Cursor when none was saved.
// Errors: domain.ErrRetryable when PostgreSQL was unreachable or timed out.
func (s *Store) LoadCheckpoint(ctx context.Context, name string) (Cursor, error) {
	return s.queryCursor(ctx, "load relay checkpoint",
		`SELECT tx_id, position FROM relay_checkpoints WHERE name = $1`, name)
}

// queryCursor runs a query of at most one (tx_id, position) row; no row is the zero Cursor.
func (s *Store) queryCursor(ctx context.Context, op, query string, args ...any) (Cursor, error) {
	var c Cursor
	err := s.pool.QueryRow(ctx, query, args...).Scan(&c.TxID, &c.Position)
	if errors.Is(err, pgx.ErrNoRows) {
		return Cursor{}, nil
	}
	if err != nil {
		return Cursor{}, wrapErr(op, err)
	}
	return c, nil
}
