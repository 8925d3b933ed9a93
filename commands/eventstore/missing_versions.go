package eventstore

import (
	"context"

	"github.com/imledger/imledger/domain"
)

// StreamProbe asks which versions of a stream below Below are missing.
type StreamProbe struct {
	Tenant   domain.TenantID
	StreamID string
	Below    int64 // exclusive upper bound
}

// VersionRange is a run of stream versions, both ends inclusive.
type VersionRange struct{ From, To int64 }

// MissingVersions returns, for each probe in order, the versions in [max(1, Below-window), Below)
// that the stream does not hold, as ascending ranges. It is how the relay's gap sweeper learns
// what a conversation left open before it first sees the conversation in a term. One query
// counts each probe's window over the stream's unique index; only windows with holes are read
// version by version in a second query. Errors: domain.ErrRetryable when PostgreSQL was
// unreachable or timed out.
func (s *Store) MissingVersions(ctx context.Context, probes []StreamProbe, window int64) ([][]VersionRange, error) {
	const op = "find missing stream versions"
	out := make([][]VersionRange, len(probes))
	if len(probes) == 0 || window <= 0 {
		return out, nil
	}
	tenants := make([]string, len(probes))
	streams := make([]string, len(probes))
	los := make([]int64, len(probes))
	belows := make([]int64, len(probes))
	for i, p := range probes {
		tenants[i], streams[i], belows[i] = p.Tenant.String(), p.StreamID, p.Below
		los[i] = max(1, p.Below-window)
	}
	rows, err := s.pool.Query(ctx, `SELECT u.i, count(e.stream_version)
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) WITH ORDINALITY AS u(tenant, stream, lo, below, i)
		LEFT JOIN events e ON e.tenant_id = u.tenant AND e.stream_id = u.stream
			AND e.stream_version >= u.lo AND e.stream_version < u.below
		GROUP BY u.i`, tenants, streams, los, belows)
	if err != nil {
		return nil, wrapErr(op, err)
	}
	var holed []int
	for rows.Next() {
		var i, n int64
		if err := rows.Scan(&i, &n); err != nil {
			rows.Close()
			return nil, wrapErr(op, err)
		}
		if k := int(i) - 1; n < belows[k]-los[k] {
			holed = append(holed, k)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, wrapErr(op, err)
	}
	if len(holed) == 0 {
		return out, nil
	}
	present, err := s.presentVersions(ctx, holed, tenants, streams, los, belows)
	if err != nil {
		return nil, wrapErr(op, err)
	}
	for _, k := range holed {
		next := los[k]
		for _, v := range present[k] {
			if v > next {
				out[k] = append(out[k], VersionRange{From: next, To: v - 1})
			}
			next = v + 1
		}
		if next < belows[k] {
			out[k] = append(out[k], VersionRange{From: next, To: belows[k] - 1})
		}
	}
	return out, nil
}

// presentVersions reads the stored versions of the probes at indexes ks within their windows.
func (s *Store) presentVersions(ctx context.Context, ks []int, tenants, streams []string, los, belows []int64) (map[int][]int64, error) {
	idx := make([]int64, len(ks))
	var t, st []string
	var lo, below []int64
	for j, k := range ks {
		idx[j] = int64(k)
		t, st = append(t, tenants[k]), append(st, streams[k])
		lo, below = append(lo, los[k]), append(below, belows[k])
	}
	rows, err := s.pool.Query(ctx, `SELECT u.k, e.stream_version
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::bigint[]) AS u(k, tenant, stream, lo, below)
		JOIN events e ON e.tenant_id = u.tenant AND e.stream_id = u.stream
			AND e.stream_version >= u.lo AND e.stream_version < u.below
		ORDER BY u.k, e.stream_version`, idx, t, st, lo, below)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int][]int64, len(ks))
	for rows.Next() {
		var k, v int64
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[int(k)] = append(out[int(k)], v)
	}
	return out, rows.Err()
}
