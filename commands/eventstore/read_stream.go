package eventstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/domain"
)

// batchSender sends a batch: a transaction, or the pool (one implicit transaction).
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// querier is what reads need from a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// LastVersion returns the highest stored version of the stream, 0 for an empty or unknown
// stream. Conversation streams may have holes, so it is not the number of events.
// Errors: domain.ErrRetryable when PostgreSQL was unreachable or timed out.
func (s *Store) LastVersion(ctx context.Context, tenant domain.TenantID, streamID string) (int64, error) {
	v, err := lastVersion(ctx, s.pool, tenant, streamID)
	if err != nil {
		return 0, wrapErr("read last stream version", err)
	}
	return v, nil
}

func lastVersion(ctx context.Context, q querier, tenant domain.TenantID, streamID string) (int64, error) {
	var v int64
	err := q.QueryRow(ctx,
		`SELECT coalesce(max(stream_version), 0) FROM event_keys WHERE tenant_id = $1 AND stream_id = $2`,
		tenant.String(), streamID).Scan(&v)
	return v, err
}

// ReadStream returns up to limit events of the stream with a version above afterVersion, in
// version order (limit <= 0 or above Config.MaxRead means MaxRead). Fewer than limit events
// means the stream holds no more right now. Payloads come back as PostgreSQL's jsonb rendering
// (key order and whitespace normalised). Errors: domain.ErrRetryable when PostgreSQL was
// unreachable or timed out.
func (s *Store) ReadStream(ctx context.Context, tenant domain.TenantID, streamID string, afterVersion int64, limit int) ([]domain.Envelope, error) {
	const op = "read stream"
	rows, err := s.pool.Query(ctx, `SELECT `+envelopeColumns+` FROM events
		WHERE tenant_id = $1 AND stream_id = $2 AND stream_version > $3
		ORDER BY stream_version LIMIT $4`,
		tenant.String(), streamID, afterVersion, s.cfg.limit(limit))
	if err != nil {
		return nil, wrapErr(op, err)
	}
	events, err := collectEnvelopes(rows)
	if err != nil {
		return nil, wrapErr(op, err)
	}
	return events, nil
}

// FindByIdempotencyKey returns the stream's event stored with the idempotency key.
// Errors: domain.ErrNotFound when there is none (an empty key never matches);
// domain.ErrRetryable when PostgreSQL was unreachable or timed out.
func (s *Store) FindByIdempotencyKey(ctx context.Context, tenant domain.TenantID, streamID, key string) (domain.Envelope, error) {
	const op = "find event by idempotency key"
	if key == "" {
		return domain.Envelope{}, fmt.Errorf("%s: empty key: %w", op, domain.ErrNotFound)
	}
	var sc envelopeScanner
	e, err := sc.scanCurrent(s.pool.QueryRow(ctx, `SELECT `+envelopeColumns+` FROM events
		JOIN (SELECT tenant_id, stream_id, stream_version FROM event_keys
			WHERE tenant_id = $1 AND stream_id = $2 AND idempotency_key = $3) AS k USING (tenant_id, stream_id, stream_version)`,
		tenant.String(), streamID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Envelope{}, fmt.Errorf("%s: stream %s/%s: %w", op, tenant, streamID, domain.ErrNotFound)
	}
	if err != nil {
		return domain.Envelope{}, wrapErr(op, err)
	}
	return e, nil
}

// notify signals NotifyChannel when tx commits. PostgreSQL folds identical notifications of one
// transaction into one.
func (s *Store) notify(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, notifySQL, s.cfg.NotifyChannel)
	return err
}

// notifySQL signals the channel given as $1.
const notifySQL = `SELECT pg_notify($1, '')`

// LastEvent returns the event of the stream with the highest version, upcast as ReadStream's are,
// and whether the stream has any: a stream whose last event is its current state (a device, a
// mute) is decided on from one row. Errors: domain.ErrRetryable when PostgreSQL was unreachable
// or timed out.
func (s *Store) LastEvent(ctx context.Context, tenant domain.TenantID, streamID string) (domain.Envelope, bool, error) {
	const op = "read last event"
	rows, err := s.pool.Query(ctx, `SELECT `+envelopeColumns+` FROM events
		WHERE tenant_id = $1 AND stream_id = $2 ORDER BY stream_version DESC LIMIT 1`, tenant.String(), streamID)
	if err != nil {
		return domain.Envelope{}, false, wrapErr(op, err)
	}
	events, err := collectEnvelopes(rows)
	if err != nil {
		return domain.Envelope{}, false, wrapErr(op, err)
	}
	if len(events) == 0 {
		return domain.Envelope{}, false, nil
	}
	return events[0], true, nil
}
