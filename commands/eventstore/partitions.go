package eventstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/domain"
)

// MonthPartition is one monthly partition of the message events (events_mYYYYMM, see
// migrations/postgres/00020_events_partitioned.sql): the message events that occurred in Month.
type MonthPartition struct {
	Name  string
	Month time.Time // first instant of the month, UTC
}

// End returns the first instant after the partition's month.
func (p MonthPartition) End() time.Time { return p.Month.AddDate(0, 1, 0) }

// partitionName matches the names of month partitions.
var partitionName = regexp.MustCompile(`^events_m([0-9]{4})([0-9]{2})$`)

// EnsureMonths creates the month partitions of the months from through through (both included,
// UTC) that do not exist yet; rows of such a month that were written meanwhile to the default
// partition move into the new one. It returns how many it created. Creating a partition takes a
// short exclusive lock on the partitioned table, so it is done ahead of time (the retention job
// keeps the next months ready). Errors: domain.ErrRetryable when PostgreSQL failed transiently.
func (s *Store) EnsureMonths(ctx context.Context, from, through time.Time) (int, error) {
	created := 0
	for m := domain.MonthStart(from); !m.After(through); m = m.AddDate(0, 1, 0) {
		var made bool
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT events_ensure_month($1)`, m).Scan(&made)
		})
		if err != nil {
			return created, wrapErr("ensure month partition "+m.Format("2006-01"), err)
		}
		if made {
			created++
		}
	}
	return created, nil
}

// MonthPartitions lists the month partitions, oldest first. Errors: domain.ErrRetryable when
// PostgreSQL failed transiently.
func (s *Store) MonthPartitions(ctx context.Context) ([]MonthPartition, error) {
	rows, err := s.pool.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'events_expiring'::regclass ORDER BY c.relname`)
	if err != nil {
		return nil, wrapErr("list month partitions", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, wrapErr("list month partitions", err)
	}
	var out []MonthPartition
	for _, n := range names {
		m := partitionName.FindStringSubmatch(n)
		if m == nil {
			continue // the default partition
		}
		month, err := time.Parse("200601", m[1]+m[2])
		if err != nil {
			return nil, fmt.Errorf("month partition %s: %w", n, err)
		}
		out = append(out, MonthPartition{Name: n, Month: month.UTC()})
	}
	return out, nil
}

// ErrPartitionKept is why DropMonth left a partition in place; the error says which condition
// held it.
var ErrPartitionKept = errors.New("month partition kept")

// partitionTenantsSQL lists the tenants with events in a partition (%I), skipping from one
// tenant to the next along the partition's index on (tenant_id, event_type, position), so a
// month of millions of events costs one probe per tenant.
const partitionTenantsSQL = `WITH RECURSIVE t AS (
  (SELECT tenant_id FROM %[1]s ORDER BY tenant_id LIMIT 1)
  UNION ALL
  SELECT (SELECT tenant_id FROM %[1]s WHERE tenant_id > t.tenant_id ORDER BY tenant_id LIMIT 1)
  FROM t WHERE t.tenant_id IS NOT NULL)
SELECT t.tenant_id FROM t LEFT JOIN tenants r USING (tenant_id)
WHERE t.tenant_id IS NOT NULL AND (r.retained_before IS NULL OR r.retained_before < $1) LIMIT 1`

// unrelayedSQL finds a relay (relay_checkpoints) that has not published every row of a
// partition (%I) yet, or is republishing some of them; no relay at all counts as not relayed.
const unrelayedSQL = `SELECT name FROM relay_checkpoints c
WHERE EXISTS (SELECT 1 FROM %[1]s e WHERE (e.tx_id, e.position) > (c.tx_id, c.position))
   OR (c.replay_tx_id IS NOT NULL AND EXISTS (SELECT 1 FROM %[1]s e
       WHERE (e.tx_id, e.position) > (c.replay_tx_id, c.replay_position)))
UNION ALL SELECT '(no relay)' WHERE NOT EXISTS (SELECT 1 FROM relay_checkpoints) LIMIT 1`

// pruneKeysSQL deletes the keys of a partition's (%I) events, except the highest of each stream,
// so a stream's next version (a conversation's next seq) still follows its last one.
const pruneKeysSQL = `DELETE FROM event_keys k USING %[1]s e
WHERE k.event_id = e.event_id
  AND k.stream_version < (SELECT max(stream_version) FROM event_keys m WHERE m.tenant_id = k.tenant_id AND m.stream_id = k.stream_id)`

// DropMonth drops partition p with its events when both hold: every tenant with events in it has
// a retention horizon (tenants.retained_before, written with tenant.retention_applied.v1) at or
// after the end of its month, and every relay has published all of its rows. Otherwise nothing
// changes and the error wraps ErrPartitionKept, naming the tenant or relay that keeps it. Both are
// checked first without a lock (a month a tenant keeps costs a few index probes), then again
// with the partition locked, so an append still writing to it is waited for and counted; a lock
// not granted within lockWait is a retryable error. The keys of the dropped events are deleted
// too, except each stream's highest. Errors otherwise: domain.ErrRetryable when PostgreSQL failed
// transiently.
func (s *Store) DropMonth(ctx context.Context, p MonthPartition, lockWait time.Duration) error {
	op := "drop month partition " + p.Name
	if !partitionName.MatchString(p.Name) {
		return invalid("partition", "bad_format", "events_mYYYYMM")
	}
	name := pgx.Identifier{p.Name}.Sanitize()
	var kept string
	err := s.inTx(ctx, func(tx pgx.Tx) (err error) {
		kept, err = keptBy(ctx, tx, p, name)
		return err
	})
	if err == nil && kept == "" {
		err = s.inTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", max(lockWait.Milliseconds(), 1))); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "LOCK TABLE "+name+" IN ACCESS EXCLUSIVE MODE"); err != nil {
				return err
			}
			var err error
			if kept, err = keptBy(ctx, tx, p, name); err != nil || kept != "" {
				return err
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf(pruneKeysSQL, name)); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, "DROP TABLE "+name)
			return err
		})
	}
	if err != nil {
		return wrapErr(op, err)
	}
	if kept != "" {
		return fmt.Errorf("%s: %s: %w", op, kept, ErrPartitionKept)
	}
	return nil
}

// keptBy returns why partition p (quoted as name) must stay, or "" when it may go.
func keptBy(ctx context.Context, tx pgx.Tx, p MonthPartition, name string) (string, error) {
	var who string
	err := tx.QueryRow(ctx, fmt.Sprintf(partitionTenantsSQL, name), p.End()).Scan(&who)
	if err == nil {
		return "tenant " + who + " keeps messages of " + p.Month.Format("2006-01"), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", err
	}
	err = tx.QueryRow(ctx, fmt.Sprintf(unrelayedSQL, name)).Scan(&who)
	if err == nil {
		return "relay " + who + " has not published all of " + p.Month.Format("2006-01"), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", err
	}
	return "", nil
}
