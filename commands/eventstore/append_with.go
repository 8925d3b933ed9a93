package eventstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/domain"
)

// TxHook runs inside an append's transaction after its events were inserted, with the envelopes
// as stored. It keeps a table that mirrors a stream's current state (the tenant registry, account
// governance) exactly in step with the events: both commit or neither does.
type TxHook func(ctx context.Context, tx pgx.Tx, stored []domain.Envelope) error

// AppendWith is Append with hook run in the same transaction after the insert; an error of hook
// rolls everything back and is returned wrapped (a transient database failure as
// domain.ErrRetryable). Errors and guarantees are otherwise Append's.
func (s *Store) AppendWith(ctx context.Context, tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope, hook TxHook) ([]domain.Envelope, error) {
	const op = "append events"
	if len(events) == 0 {
		return nil, nil
	}
	if err := s.checkBatchSize(len(events)); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if expectedVersion < 0 {
		return nil, fmt.Errorf("%s: %w", op, invalid("expected_version", "bad_format", "not negative"))
	}
	out, arrays, err := prepareStream(tenant, streamID, expectedVersion, events)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	args := append(arrays.args(), tenant.String(), streamID, expectedVersion)
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		positions, err := s.insertAndNotify(ctx, tx, appendSQL, args)
		if err != nil {
			return err
		}
		if len(positions) == 0 {
			return versionMismatch(ctx, tx, tenant, streamID)
		}
		for i := range out {
			out[i].Position = positions[out[i].EventID]
		}
		if hook != nil {
			if err := hook(ctx, tx, out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, appendErr(op, tenant, streamID, expectedVersion, len(events), err)
	}
	return out, nil
}

// FindCaused reports whether tenant has an event whose causation_id is causationID: the events of
// an admin command carry the command's event id there.
func (s *Store) FindCaused(ctx context.Context, tenant domain.TenantID, causationID string) (bool, error) {
	if causationID == "" {
		return false, nil
	}
	var found bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE tenant_id = $1 AND causation_id = $2)`,
		tenant.String(), causationID).Scan(&found)
	if err != nil {
		return false, wrapErr("find caused events", err)
	}
	return found, nil
}
