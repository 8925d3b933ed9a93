package eventstore

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/domain"
)

// StreamHole is a run of missing seqs [From, To] of a conversation.
type StreamHole struct {
	Tenant domain.TenantID
	Topic  domain.Topic
	From   int64
	To     int64
}

// historicHolesSQL finds the runs of seqs missing below the highest seq of every conversation
// stream ($1: the event types that hold a seq), one window pass over the conversation events.
const historicHolesSQL = `SELECT tenant_id, stream_id, prev + 1, stream_version - 1 FROM (
	SELECT tenant_id, stream_id, stream_version,
		lag(stream_version, 1, 0::bigint) OVER (PARTITION BY tenant_id, stream_id ORDER BY stream_version) AS prev
	FROM events WHERE event_type = ANY($1)) e
WHERE stream_version > prev + 1
ORDER BY tenant_id, stream_id, stream_version`

// HistoricHoles calls found for every run of seqs missing below the highest seq of a
// conversation stream, in (tenant, stream, seq) order; found's error stops the scan and is
// returned. It reads every message event once, so it is meant for a one-time sweep of a history
// written before seq-skip markers existed. Errors: domain.ErrRetryable when PostgreSQL was
// unreachable or timed out.
func (s *Store) HistoricHoles(ctx context.Context, found func(StreamHole) error) error {
	const op = "find historic holes"
	types := []string{string(domain.EventGroupMessageSent), string(domain.EventDirectMessageSent),
		string(domain.EventGroupSeqSkipped), string(domain.EventDirectSeqSkipped)}
	rows, err := s.pool.Query(ctx, historicHolesSQL, types)
	if err != nil {
		return wrapErr(op, err)
	}
	defer rows.Close()
	var holes []StreamHole
	for rows.Next() {
		var (
			tenant, stream string
			h              StreamHole
		)
		if err := rows.Scan(&tenant, &stream, &h.From, &h.To); err != nil {
			return wrapErr(op, err)
		}
		var perr error
		if h.Tenant, perr = domain.NewTenantID(tenant); perr == nil {
			h.Topic, perr = domain.ParseTopic(stream)
		}
		if perr != nil {
			continue // not a conversation stream this build knows; nothing to give up
		}
		holes = append(holes, h)
	}
	if err := rows.Err(); err != nil {
		return wrapErr(op, err)
	}
	rows.Close()
	for _, h := range holes {
		if err := found(h); err != nil {
			return err
		}
	}
	return nil
}

// MarkHolesSwept records, in term, that the relay called name has given up every historic hole.
// Errors: ErrStaleTerm when term is not current; domain.ErrRetryable when PostgreSQL was
// unreachable or timed out.
func (s *Store) MarkHolesSwept(ctx context.Context, name string, term int64) error {
	const op = "mark historic holes swept"
	tag, err := s.pool.Exec(ctx, `UPDATE relay_checkpoints SET holes_swept = true WHERE name = $1 AND term = $2`, name, term)
	if err != nil {
		return wrapErr(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: relay %s, term %d: %w", op, name, term, ErrStaleTerm)
	}
	return nil
}
