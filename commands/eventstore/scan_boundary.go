package eventstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// Boundary returns the cursor of the n-th event of r after r.From in commit-safe order, of any
// tenant and type, and true; false when r holds fewer than n events. It reads the
// (tx_id, position) index only, so splitting a long range into stretches of about n events for
// concurrent readers (ScanCommitted of each stretch) costs a fraction of reading it.
// Errors: domain.ErrRetryable when PostgreSQL was unreachable or timed out.
func (s *Store) Boundary(ctx context.Context, r Range, n int) (Cursor, bool, error) {
	if n < 1 {
		n = 1
	}
	rw, args := r.where([]any{n - 1})
	var c Cursor
	err := s.pool.QueryRow(ctx, `SELECT tx_id, position FROM events WHERE `+rw+
		` ORDER BY tx_id, position OFFSET $1 LIMIT 1`, args...).Scan(&c.TxID, &c.Position)
	if errors.Is(err, pgx.ErrNoRows) {
		return Cursor{}, false, nil
	}
	if err != nil {
		return Cursor{}, false, wrapErr("find a scan boundary", err)
	}
	return c, true, nil
}
