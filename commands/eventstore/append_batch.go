package eventstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/imledger/imledger/domain"
)

// AppendStatus is the outcome of one event of an AppendBatch.
type AppendStatus int

// The outcomes of an event in AppendBatch.
const (
	// Appended: the event was stored at its StreamVersion.
	Appended AppendStatus = iota + 1
	// VersionTaken: another event already holds the stream version; nothing was stored.
	// For a conversation stream this means the seq was taken (Redis lost its counter): re-seed
	// from LastVersion and try again with a new seq.
	VersionTaken
	// Duplicate: an event with the same idempotency key in the same stream (or the same event
	// id) is already stored, possibly earlier in the same batch; Existing holds it.
	Duplicate
)

// String returns the lower-case name of the status.
func (s AppendStatus) String() string {
	switch s {
	case Appended:
		return "appended"
	case VersionTaken:
		return "version_taken"
	case Duplicate:
		return "duplicate"
	default:
		return fmt.Sprintf("append_status(%d)", int(s))
	}
}

// AppendResult is the outcome of one event of an AppendBatch.
type AppendResult struct {
	// Status says whether the event was stored.
	Status AppendStatus
	// Position is the global position of the stored event for Appended, and of the original
	// event for Duplicate; 0 for VersionTaken.
	Position int64
	// Existing is the stored original for Duplicate (answer the caller with its stream version
	// and event id); zero otherwise.
	Existing domain.Envelope
}

// appendBatchSQL writes every row that violates no unique constraint; later rows of the batch
// that conflict with earlier ones are skipped the same way as conflicts with stored rows. The
// keys are claimed first (event_keys, in batch order, ON CONFLICT DO NOTHING), and a row is
// written when its key went in; the batch's event ids must be distinct (AppendBatch sends a
// repeated id once). It runs as one statement in an implicit transaction — one round trip
// instead of BEGIN, INSERT, NOTIFY, COMMIT — and signals the notify channel ($21) when it
// inserted anything; that extra row has a NULL event id.
const appendBatchSQL = `WITH rows AS (SELECT * FROM ` + unnestRows + ` AS r(` + insertColumns + `)),
keys AS (INSERT INTO event_keys (` + keysColumns + `)
SELECT ` + keysColumns + ` FROM rows
ON CONFLICT DO NOTHING
RETURNING event_id),
ins AS (INSERT INTO events (` + insertColumns + `, expiring)
SELECT *, ` + expiringExpr + ` FROM rows WHERE event_id IN (SELECT event_id FROM keys)
RETURNING event_id, position)
SELECT event_id, position FROM ins
UNION ALL
SELECT NULL::uuid, 0::bigint FROM (SELECT pg_notify($21, '')) AS n WHERE EXISTS (SELECT 1 FROM ins)`

// lookupSQL finds the stored events that made rows of a batch conflict: by event id ($1) and by
// (tenant, stream, idempotency key) ($2, $3, $4), through their keys (event_keys). It runs in
// the batch's transaction, so it sees the rows the batch itself inserted. An event whose month
// was dropped by retention is not found.
const lookupSQL = `SELECT ` + envelopeColumns + ` FROM events
JOIN (SELECT tenant_id, stream_id, stream_version FROM event_keys WHERE event_id = ANY($1::uuid[])
  UNION
  SELECT k.tenant_id, k.stream_id, k.stream_version FROM event_keys k
  JOIN unnest($2::text[], $3::text[], $4::text[]) AS q(tenant_id, stream_id, idempotency_key)
    USING (tenant_id, stream_id, idempotency_key)
  WHERE k.idempotency_key IS NOT NULL) AS found USING (tenant_id, stream_id, stream_version)`

// AppendBatch is the group-commit append of the send path: it writes events of any streams in
// one transaction with one INSERT, each exactly at its own StreamVersion (no expected-version
// check), and reports a result per event in input order. Events are tried in slice order, so of
// two events of a batch with the same idempotency key the second is a Duplicate of the first.
// NotifyChannel is signalled when at least one event was appended.
//
// Errors (then nothing is written): domain.ErrInvalid for a bad envelope or more than
// Config.MaxBatch events, domain.ErrRetryable when PostgreSQL was unreachable, timed out or
// chose the transaction as a deadlock victim. Conflicts are never errors: they are results.
// Retrying the same envelopes is always safe, also after a connection lost during COMMIT: the
// events that were stored come back as Duplicate of themselves (same event id).
func (s *Store) AppendBatch(ctx context.Context, events []domain.Envelope) ([]AppendResult, error) {
	const op = "append events"
	if len(events) == 0 {
		return nil, nil
	}
	if err := s.checkBatchSize(len(events)); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	prepared := make([]domain.Envelope, len(events))
	arrays := newEventArrays(len(events))
	ids := make(map[[16]byte]struct{}, len(events))
	for i, e := range events {
		p, err := prepare(e)
		if err != nil {
			return nil, fmt.Errorf("%s: event %d: %w", op, i, err)
		}
		prepared[i] = p
		if _, repeated := ids[p.EventID]; repeated {
			continue // a Duplicate of the first, or of what took its place (resolveConflicts)
		}
		ids[p.EventID] = struct{}{}
		arrays.add(p)
	}
	results, err := s.appendBatch(ctx, prepared, arrays)
	if err != nil {
		return nil, wrapErr(op, err)
	}
	return results, nil
}

// appendBatch inserts the batch in one statement and resolves the rows that were not inserted.
// The statement has committed by the time it returns: ON CONFLICT waits for a conflicting
// transaction in flight, so the lookup sees every row that made one of ours conflict (a row whose
// writer rolled back leaves a VersionTaken result, and the caller simply retries at a new version).
func (s *Store) appendBatch(ctx context.Context, events []domain.Envelope, arrays *eventArrays) ([]AppendResult, error) {
	positions, err := insertBatch(ctx, s.pool, append(arrays.args(), s.cfg.NotifyChannel))
	if err != nil {
		return nil, err
	}
	results := make([]AppendResult, len(events))
	var pending []int
	for i, e := range events {
		// The first event with an id is the one inserted; a repeated id is a conflict.
		if pos, ok := positions[e.EventID]; ok {
			results[i] = AppendResult{Status: Appended, Position: pos}
			delete(positions, e.EventID)
			continue
		}
		pending = append(pending, i)
	}
	if len(pending) > 0 {
		if err := resolveConflicts(ctx, s.pool, events, pending, results); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// insertBatch runs appendBatchSQL and maps inserted event ids to positions.
func insertBatch(ctx context.Context, q querier, args []any) (map[[16]byte]int64, error) {
	rows, err := q.Query(ctx, appendBatchSQL, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	positions := make(map[[16]byte]int64)
	for rows.Next() {
		var (
			id  pgtype.UUID
			pos int64
		)
		if err := rows.Scan(&id, &pos); err != nil {
			return nil, err
		}
		if id.Valid {
			positions[id.Bytes] = pos
		}
	}
	return positions, rows.Err()
}

// streamKey identifies an idempotency key within a stream.
type streamKey struct{ tenant, stream, key string }

// resolveConflicts fills results[i] for every pending index with Duplicate or VersionTaken.
func resolveConflicts(ctx context.Context, tx querier, events []domain.Envelope, pending []int, results []AppendResult) error {
	ids := make([]pgtype.UUID, 0, len(pending))
	var tenants, streams, keys []string
	for _, i := range pending {
		e := events[i]
		ids = append(ids, pgtype.UUID{Bytes: e.EventID, Valid: true})
		if e.IdempotencyKey != "" {
			tenants = append(tenants, e.TenantID.String())
			streams = append(streams, e.StreamID)
			keys = append(keys, e.IdempotencyKey)
		}
	}
	rows, err := tx.Query(ctx, lookupSQL, ids, tenants, streams, keys)
	if err != nil {
		return err
	}
	stored, err := collectEnvelopes(rows)
	if err != nil {
		return err
	}
	byID := make(map[[16]byte]domain.Envelope, len(stored))
	byKey := make(map[streamKey]domain.Envelope, len(stored))
	for _, e := range stored {
		byID[e.EventID] = e
		if e.IdempotencyKey != "" {
			byKey[streamKey{e.TenantID.String(), e.StreamID, e.IdempotencyKey}] = e
		}
	}
	for _, i := range pending {
		e := events[i]
		orig, dup := domain.Envelope{}, false
		if e.IdempotencyKey != "" {
			orig, dup = byKey[streamKey{e.TenantID.String(), e.StreamID, e.IdempotencyKey}]
		}
		if !dup {
			orig, dup = byID[e.EventID]
		}
		if dup {
			results[i] = AppendResult{Status: Duplicate, Position: orig.Position, Existing: orig}
		} else {
			results[i] = AppendResult{Status: VersionTaken}
		}
	}
	return nil
}
