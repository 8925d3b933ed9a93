package eventstore

import (
	"context"
	"strconv"
	"strings"

	"github.com/imledger/imledger/domain"
)

// Filter selects events for replays and rebuilds; it is domain.EventFilter, declared in domain
// so that readers of the log (projections' rebuilds) can name it without importing the store.
type Filter = domain.EventFilter

// filterWhere renders f as a WHERE clause body over args, appending its parameters.
func filterWhere(f Filter, args []any) (string, []any) {
	conds := []string{"true"}
	param := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if !f.Tenant.IsZero() {
		conds = append(conds, "tenant_id = "+param(f.Tenant.String()))
	}
	if len(f.EventTypes) > 0 {
		types := make([]string, len(f.EventTypes))
		for i, t := range f.EventTypes {
			types[i] = string(t)
		}
		conds = append(conds, "event_type = ANY("+param(types)+"::text[])")
	}
	if f.StreamPrefix != "" {
		conds = append(conds, "starts_with(stream_id, "+param(f.StreamPrefix)+")")
	}
	if !f.Since.IsZero() {
		conds = append(conds, "occurred_at >= "+param(f.Since)+"::timestamptz")
	}
	if !f.Until.IsZero() {
		conds = append(conds, "occurred_at < "+param(f.Until)+"::timestamptz")
	}
	return strings.Join(conds, " AND "), args
}

// ReadAll returns up to limit events matching f with a position above afterPosition, in
// position order (limit <= 0 or above Config.MaxRead means MaxRead); pass the last position
// back to read on; events come upcast to the current version of their type (domain.Upcast).
// Position order is append order, not commit order: for a rebuild that must
// not miss events committed late, read after the writers stopped or use ReadCommitted.
// Errors: domain.ErrRetryable when PostgreSQL was unreachable or timed out.
func (s *Store) ReadAll(ctx context.Context, f Filter, afterPosition int64, limit int) ([]domain.Envelope, error) {
	const op = "read all events"
	where, args := filterWhere(f, []any{afterPosition, s.cfg.limit(limit)})
	rows, err := s.pool.Query(ctx, `SELECT `+envelopeColumns+` FROM events
		WHERE position > $1 AND `+where+` ORDER BY position LIMIT $2`, args...)
	if err != nil {
		return nil, wrapErr(op, err)
	}
	events, err := collectEnvelopes(rows)
	if err != nil {
		return nil, wrapErr(op, err)
	}
	return events, nil
}

// Count returns the number of events matching f, for progress reporting of a rebuild.
// Errors: domain.ErrRetryable when PostgreSQL was unreachable or timed out.
func (s *Store) Count(ctx context.Context, f Filter) (int64, error) {
	where, args := filterWhere(f, nil)
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE `+where, args...).Scan(&n); err != nil {
		return 0, wrapErr("count events", err)
	}
	return n, nil
}
