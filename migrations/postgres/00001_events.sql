-- Event store (DESIGN §4): the events table is both the source of truth and the transactional
-- outbox that the relay tails in commit-safe (tx_id, position) order.

-- +goose Up
CREATE TABLE events (
    -- Global append order. Not commit order: the relay orders by (tx_id, position).
    position        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Writing transaction, compared against pg_snapshot_xmin so rows committed late are not skipped.
    tx_id           xid8        NOT NULL DEFAULT pg_current_xact_id(),
    event_id        uuid        NOT NULL,
    tenant_id       text        NOT NULL,
    stream_id       text        NOT NULL,
    -- For conversation streams this is the message seq.
    stream_version  bigint      NOT NULL CHECK (stream_version > 0),
    event_type      text        NOT NULL,
    -- Schema version of the payload.
    version         integer     NOT NULL,
    trace_id        text        NOT NULL DEFAULT '',
    correlation_id  text        NOT NULL DEFAULT '',
    causation_id    text        NOT NULL DEFAULT '',
    -- Set on manual replays: the event this one re-issues.
    parent_event_id uuid        NULL,
    source_service  text        NOT NULL DEFAULT '',
    target_service  text        NOT NULL DEFAULT '',
    biz_type        text        NOT NULL DEFAULT '',
    biz_id          text        NOT NULL DEFAULT '',
    idempotency_key text        NULL,
    actor_type      text        NOT NULL DEFAULT '',
    actor_id        text        NOT NULL DEFAULT '',
    occurred_at     timestamptz NOT NULL,
    payload         jsonb       NOT NULL,
    CONSTRAINT events_event_id_key UNIQUE (event_id),
    CONSTRAINT events_stream_version_key UNIQUE (tenant_id, stream_id, stream_version)
);

-- The final word on send idempotency, even when Redis lost its keys.
CREATE UNIQUE INDEX events_idempotency_key ON events (tenant_id, stream_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- The relay's commit-safe tail.
CREATE INDEX events_tx_position ON events (tx_id, position);

-- Replays and read-model rebuilds by tenant and event type.
CREATE INDEX events_replay ON events (tenant_id, event_type, position);

-- Where each relay (by name) has published up to, inclusive.
CREATE TABLE relay_checkpoints (
    name       text        PRIMARY KEY,
    tx_id      xid8        NOT NULL,
    position   bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE relay_checkpoints;
DROP TABLE events;
