package projections

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/imledger/imledger/migrations"
)

// The dead-letter and parking tables (projection_dead_letters, projection_parked_events) are
// created by the event store migration migrations/postgres/00003_projections.sql, which
// `imledger migrate` and `imledger serve` apply.

// EnsureSchema makes sure pool's database has the dead-letter and parking tables by applying the
// pending event store migrations (migrations.UpPostgres): a no-op on a migrated database, and
// safe to run from several processes at once (goose holds an advisory lock). Processes that run
// projectors or operate dead letters on a database nobody migrated call it first.
func EnsureSchema(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := migrations.UpPostgres(ctx, db); err != nil {
		return fmt.Errorf("projections: ensure schema: %w", err)
	}
	return nil
}
