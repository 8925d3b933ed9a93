package eventstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/domain"
)

// appendCTEs are the common table expressions of an append at an expected version: the unnested
// rows; their keys (keysColumns), inserted into event_keys only when the stream's current version
// ($23) is the expected one; and, only when the keys went in, the rows themselves ("appended",
// columns event_id and position). A concurrent append of the same version waits for the other
// transaction and then fails with a unique violation of event_keys.
const appendCTEs = `rows AS (SELECT * FROM ` + unnestRows + ` AS r(` + insertColumns + `)),
keys AS (INSERT INTO event_keys (` + keysColumns + `)
SELECT ` + keysColumns + ` FROM rows
WHERE (SELECT coalesce(max(stream_version), 0) FROM event_keys WHERE tenant_id = $21 AND stream_id = $22) = $23
RETURNING event_id),
appended AS (INSERT INTO events (` + insertColumns + `, expiring)
SELECT *, ` + expiringExpr + ` FROM rows WHERE EXISTS (SELECT 1 FROM keys)
RETURNING event_id, position)`

// appendSQL is an append at an expected version (appendCTEs); it returns the appended rows, none
// when the stream was not at the expected version.
const appendSQL = `WITH ` + appendCTEs + ` SELECT event_id, position FROM appended`

// Append writes events to one stream in one transaction, at stream versions expectedVersion+1,
// expectedVersion+2, … in slice order (0 expects an empty stream), and signals NotifyChannel.
// The tenant and stream of each envelope are set from the arguments; an envelope that names a
// different tenant or stream is invalid. It returns the envelopes as stored, with StreamVersion
// and Position set and OccurredAt in UTC at microsecond precision.
//
// Errors: domain.ErrConcurrency when the stream's current version is not expectedVersion (it
// moved ahead, is behind, or a concurrent append took one of the versions) and when an event id
// or idempotency key is already stored; domain.ErrInvalid for a bad envelope or more than
// Config.MaxBatch events; domain.ErrRetryable when PostgreSQL was unreachable or timed out.
// Nothing is written when an error is returned, except that a connection lost during COMMIT
// leaves the outcome unknown: appending the same envelopes again then fails with ErrConcurrency
// if they were stored, and the stream can be read to find out. An empty events slice is a no-op.
func (s *Store) Append(ctx context.Context, tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope) ([]domain.Envelope, error) {
	return s.AppendWith(ctx, tenant, streamID, expectedVersion, events, nil)
}

// prepareAppend checks an append of events at expectedVersion and prepares it (prepareStream):
// the envelopes as they will be stored and appendSQL's arguments.
func (s *Store) prepareAppend(tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope) ([]domain.Envelope, []any, error) {
	if err := s.checkBatchSize(len(events)); err != nil {
		return nil, nil, err
	}
	if expectedVersion < 0 {
		return nil, nil, invalid("expected_version", "bad_format", "not negative")
	}
	out, arrays, err := prepareStream(tenant, streamID, expectedVersion, events)
	if err != nil {
		return nil, nil, err
	}
	return out, append(arrays.args(), tenant.String(), streamID, expectedVersion), nil
}

// prepareStream validates events for Append and numbers them from expectedVersion+1.
func prepareStream(tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope) ([]domain.Envelope, *eventArrays, error) {
	if tenant.IsZero() {
		return nil, nil, invalid("tenant_id", "required", "")
	}
	if streamID == "" {
		return nil, nil, invalid("stream_id", "required", "")
	}
	out := make([]domain.Envelope, len(events))
	arrays := newEventArrays(len(events))
	for i, e := range events {
		if !e.TenantID.IsZero() && e.TenantID != tenant {
			return nil, nil, fmt.Errorf("event %d: %w", i, invalid("tenant_id", "mismatch", "differs from the stream's tenant"))
		}
		if e.StreamID != "" && e.StreamID != streamID {
			return nil, nil, fmt.Errorf("event %d: %w", i, invalid("stream_id", "mismatch", "differs from the appended stream"))
		}
		e.TenantID, e.StreamID, e.StreamVersion = tenant, streamID, expectedVersion+int64(i)+1
		p, err := prepare(e)
		if err != nil {
			return nil, nil, fmt.Errorf("event %d: %w", i, err)
		}
		out[i] = p
		arrays.add(p)
	}
	return out, arrays, nil
}

// insertReturning runs an INSERT … RETURNING event_id, position and maps event ids to positions.
func insertReturning(ctx context.Context, tx pgx.Tx, sql string, args []any) (map[[16]byte]int64, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return scanPositions(rows)
}

// insertAndNotify is insertReturning followed by notify, both sent in one round trip: the
// notification goes out only if tx commits, so it may be queued before the insert's outcome is
// known.
func (s *Store) insertAndNotify(ctx context.Context, tx batchSender, sql string, args []any) (map[[16]byte]int64, error) {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue(notifySQL, s.cfg.NotifyChannel)
	res := tx.SendBatch(ctx, b)
	rows, err := res.Query()
	if err != nil {
		_ = res.Close()
		return nil, err
	}
	positions, err := scanPositions(rows)
	if err != nil {
		_ = res.Close()
		return nil, err
	}
	if _, err := res.Exec(); err != nil {
		_ = res.Close()
		return nil, err
	}
	return positions, res.Close()
}

// scanPositions maps the event ids of rows (event_id, position) to their positions and closes rows.
func scanPositions(rows pgx.Rows) (map[[16]byte]int64, error) {
	defer rows.Close()
	positions := make(map[[16]byte]int64)
	for rows.Next() {
		var (
			id  [16]byte
			pos int64
		)
		if err := rows.Scan(&id, &pos); err != nil {
			return nil, err
		}
		positions[id] = pos
	}
	return positions, rows.Err()
}

// errVersionMismatch carries the stream's actual version out of the transaction.
type errVersionMismatch struct{ actual int64 }

func (e *errVersionMismatch) Error() string { return fmt.Sprintf("stream is at version %d", e.actual) }

// versionMismatch reads the stream's current version to explain why nothing was inserted.
func versionMismatch(ctx context.Context, tx querier, tenant domain.TenantID, streamID string) error {
	actual, err := lastVersion(ctx, tx, tenant, streamID)
	if err != nil {
		return err
	}
	return &errVersionMismatch{actual: actual}
}

// appendErr maps a failed Append transaction to the package's error contract.
func appendErr(op string, tenant domain.TenantID, streamID string, expected int64, n int, err error) error {
	stream := tenant.String() + "/" + streamID
	var mismatch *errVersionMismatch
	if errors.As(err, &mismatch) {
		return fmt.Errorf("%s: stream %s: expected version %d, %s: %w", op, stream, expected, mismatch, domain.ErrConcurrency)
	}
	if constraint, ok := uniqueViolation(err); ok {
		switch constraint {
		case constraintIdempotencyKey:
			return fmt.Errorf("%s: stream %s: idempotency key already stored: %w", op, stream, domain.ErrConcurrency)
		case constraintEventID:
			return fmt.Errorf("%s: stream %s: event id already stored: %w", op, stream, domain.ErrConcurrency)
		default:
			return fmt.Errorf("%s: stream %s: versions %d..%d already taken: %w", op, stream, expected+1, expected+int64(n), domain.ErrConcurrency)
		}
	}
	return wrapErr(op, err)
}
