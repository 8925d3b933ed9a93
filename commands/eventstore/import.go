package eventstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/imledger/imledger/domain"
)

// Import writes events with one COPY in one transaction, the fastest way into the events table:
// for loading a history whose streams are new (benchmark seeds, a migration from another
// system). It checks each envelope as AppendBatch does but no expected versions: a stream version,
// event id or idempotency key that is already stored fails the whole import with
// domain.ErrConcurrency and writes nothing. No NOTIFY is sent; a relay picks the events up on its
// next poll. Errors: domain.ErrInvalid for a bad envelope, domain.ErrRetryable when PostgreSQL
// was unreachable or timed out.
func (s *Store) Import(ctx context.Context, events []domain.Envelope) (int64, error) {
	const op = "import events"
	rows, keys := make([][]any, len(events)), make([][]any, len(events))
	for i, e := range events {
		p, err := prepare(e)
		if err != nil {
			return 0, fmt.Errorf("%s: event %d: %w", op, i, err)
		}
		parent := pgtype.UUID{}
		if p.ParentEventID != nil {
			parent = pgtype.UUID{Bytes: *p.ParentEventID, Valid: true}
		}
		rows[i] = []any{pgtype.UUID{Bytes: p.EventID, Valid: true}, p.TenantID.String(), p.StreamID, p.StreamVersion,
			string(p.EventType), int32(p.Version), p.TraceID, p.CorrelationID, p.CausationID, parent, p.SourceService,
			p.TargetService, p.BizType, p.BizID, pgtype.Text{String: p.IdempotencyKey, Valid: p.IdempotencyKey != ""},
			p.Actor.Type, p.Actor.ID, p.OccurredAt, []byte(p.Payload), p.Actor.KeyID, expiring(p.EventType)}
		keys[i] = []any{rows[i][1], rows[i][2], rows[i][3], rows[i][0], rows[i][14]}
	}
	cols := append(columnList(insertColumns), "expiring")
	var n int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"event_keys"}, columnList(keysColumns), pgx.CopyFromRows(keys)); err != nil {
			return err
		}
		var err error
		n, err = tx.CopyFrom(ctx, pgx.Identifier{"events"}, cols, pgx.CopyFromRows(rows))
		return err
	})
	if err != nil {
		if _, dup := uniqueViolation(err); dup {
			return 0, fmt.Errorf("%s: %w: %w", op, domain.ErrConcurrency, err)
		}
		return 0, wrapErr(op, err)
	}
	return n, nil
}

// columnList splits a comma-separated list of column names.
func columnList(cols string) []string {
	return strings.Split(strings.Join(strings.Fields(cols), ""), ",")
}

// expiring is expiringExpr in Go, for writers that send the partition column themselves.
func expiring(t domain.EventType) bool {
	return strings.HasPrefix(string(t), "message.") && !strings.Contains(string(t), ".read_marked.")
}
