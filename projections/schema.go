package projections

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// schemaLockKey serialises EnsureSchema across processes (pg_advisory_xact_lock).
const schemaLockKey = 7_201_640_311

// schemaSQL creates the dead-letter and parking tables. A dead letter with status 'open' parks
// its conversation (consumer_group, tenant_id, conversation_key): later events of that
// conversation are stored in projection_parked_events, in consumption order, until the dead
// letter is replayed or skipped.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS projection_dead_letters (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer_group   text        NOT NULL,
    tenant_id        text        NOT NULL,
    conversation_key text        NOT NULL,
    event_id         text        NOT NULL,
    event_type       text        NOT NULL DEFAULT '',
    reason           text        NOT NULL,
    error            text        NOT NULL DEFAULT '',
    kafka_topic      text        NOT NULL DEFAULT '',
    kafka_partition  integer     NOT NULL DEFAULT -1,
    kafka_offset     bigint      NOT NULL DEFAULT -1,
    kafka_key        text        NOT NULL DEFAULT '',
    payload          bytea       NOT NULL,
    status           text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'replayed', 'skipped')),
    created_at       timestamptz NOT NULL DEFAULT now(),
    resolved_at      timestamptz NULL,
    -- A replay's own id; the replayed event is its parent (DESIGN §4).
    replay_event_id  uuid        NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS projection_dead_letters_open_event
    ON projection_dead_letters (consumer_group, event_id) WHERE status = 'open';
CREATE INDEX IF NOT EXISTS projection_dead_letters_open_conversation
    ON projection_dead_letters (consumer_group, tenant_id, conversation_key) WHERE status = 'open';

CREATE TABLE IF NOT EXISTS projection_parked_events (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dead_letter_id   bigint      NOT NULL REFERENCES projection_dead_letters (id),
    consumer_group   text        NOT NULL,
    tenant_id        text        NOT NULL,
    conversation_key text        NOT NULL,
    event_id         text        NOT NULL,
    event_type       text        NOT NULL DEFAULT '',
    kafka_topic      text        NOT NULL DEFAULT '',
    kafka_partition  integer     NOT NULL DEFAULT -1,
    kafka_offset     bigint      NOT NULL DEFAULT -1,
    payload          bytea       NOT NULL,
    parked_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT projection_parked_events_event UNIQUE (consumer_group, event_id)
);
CREATE INDEX IF NOT EXISTS projection_parked_events_dead_letter
    ON projection_parked_events (dead_letter_id, id);
`

// EnsureSchema creates the dead-letter and parking tables in pool's database if they do not
// exist. It is idempotent and safe to run from several processes at once (it holds a
// transaction-scoped advisory lock). The statements belong in a migration of
// migrations/postgres; until they move there, every process that runs projectors or operates
// dead letters calls this first.
func EnsureSchema(ctx context.Context, pool *pgxpool.Pool) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(schemaLockKey)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schemaSQL)
		return err
	})
	if err != nil {
		return fmt.Errorf("projections: ensure schema: %w", err)
	}
	return nil
}
