package eventstore

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/domain"
)

// StreamsMoved reports, for each stream i (tenants[i], streams[i]), whether it holds an event
// above versions[i]: one round trip for them all, one probe each of the key table (event_keys,
// one index over every event's stream version, where the events table has one per partition;
// its pruning keeps each stream's highest version), reading no event. It is
// how a cache of folded states confirms many states at once. The three slices have one length.
// Errors: domain.ErrRetryable when PostgreSQL was unreachable or timed out.
func (s *Store) StreamsMoved(ctx context.Context, tenants []domain.TenantID, streams []string, versions []int64) ([]bool, error) {
	const op = "find streams that moved"
	if len(tenants) != len(streams) || len(streams) != len(versions) {
		return nil, fmt.Errorf("%s: %d tenants, %d streams, %d versions", op, len(tenants), len(streams), len(versions))
	}
	out := make([]bool, len(streams))
	if len(streams) == 0 {
		return out, nil
	}
	ts := make([]string, len(tenants))
	for i, t := range tenants {
		ts[i] = t.String()
	}
	rows, err := s.pool.Query(ctx, `SELECT u.i FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS u(tenant, stream, v, i)
		WHERE EXISTS (SELECT 1 FROM event_keys e WHERE e.tenant_id = u.tenant AND e.stream_id = u.stream AND e.stream_version > u.v)`,
		ts, streams, versions)
	if err != nil {
		return nil, wrapErr(op, err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int64
		if err := rows.Scan(&i); err != nil {
			return nil, wrapErr(op, err)
		}
		if i >= 1 && int(i) <= len(out) {
			out[i-1] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, wrapErr(op, err)
	}
	return out, nil
}
