-- Dead letters and parked events of the projectors (projections package, DESIGN §5). A dead
-- letter with status 'open' parks its conversation (consumer_group, tenant_id, conversation_key):
-- later events of that conversation are stored in projection_parked_events, in consumption order,
-- until an operator replays or skips the dead letter (`imledger deadletter`).
--
-- IF NOT EXISTS: databases that ran projectors before this migration existed got these tables
-- from projections.EnsureSchema, with exactly these definitions.

-- +goose Up
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
    -- The record value as consumed (the envelope JSON).
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

-- +goose Down
DROP TABLE projection_parked_events;
DROP TABLE projection_dead_letters;
