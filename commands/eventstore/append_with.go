package eventstore

import (
	"context"
	"fmt"
	"regexp"
	"strconv"

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
	out, arrays, err := s.prepareAppend(tenant, streamID, expectedVersion, events)
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

// StatementHook builds the statement AppendWithStatement runs with an append's insert, from the
// envelopes as they are about to be stored (without Position). The statement sees the inserted
// rows as "appended" (columns event_id, position), which is empty when the stream was not at the
// expected version: it must then change nothing (e.g. INSERT … SELECT … WHERE EXISTS (SELECT 1
// FROM appended)). Its parameters are numbered from $1.
type StatementHook func(prepared []domain.Envelope) (sql string, args []any, err error)

// AppendWithStatement is AppendWith for a hook that is one SQL statement: the insert and the
// statement are one statement, sent with the notification in one round trip as one implicit
// transaction, where AppendWith takes four (begin, insert, hook, commit). Errors and guarantees
// are Append's; an error of the statement is returned as the append's.
func (s *Store) AppendWithStatement(ctx context.Context, tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope, hook StatementHook) ([]domain.Envelope, error) {
	const op = "append events"
	if len(events) == 0 {
		return nil, nil
	}
	out, arrays, err := s.prepareAppend(tenant, streamID, expectedVersion, events)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	hookSQL, hookArgs, err := hook(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	args := append(arrays.args(), tenant.String(), streamID, expectedVersion)
	sql := "WITH appended AS (" + appendSQL + "), hooked AS (" + renumberParams(hookSQL, len(args)) +
		") SELECT event_id, position FROM appended"
	args = append(args, hookArgs...)
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue(notifySQL, s.cfg.NotifyChannel)
	positions, err := func() (map[[16]byte]int64, error) {
		res := s.pool.SendBatch(ctx, b)
		defer res.Close()
		rows, err := res.Query()
		if err != nil {
			return nil, err
		}
		positions, err := scanPositions(rows)
		if err != nil {
			return nil, err
		}
		if _, err := res.Exec(); err != nil {
			return nil, err
		}
		return positions, res.Close()
	}()
	if err == nil && len(positions) == 0 {
		err = versionMismatch(ctx, s.pool, tenant, streamID)
	}
	if err != nil {
		return nil, appendErr(op, tenant, streamID, expectedVersion, len(events), err)
	}
	for i := range out {
		out[i].Position = positions[out[i].EventID]
	}
	return out, nil
}

var paramRe = regexp.MustCompile(`\$([0-9]+)`)

// renumberParams shifts the $n parameters of sql by by.
func renumberParams(sql string, by int) string {
	return paramRe.ReplaceAllStringFunc(sql, func(p string) string {
		n, _ := strconv.Atoi(p[1:])
		return "$" + strconv.Itoa(n+by)
	})
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
