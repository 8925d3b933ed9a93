-- The events table becomes partitioned so retention (docs/retention.md) can drop a month of
-- message history as a whole table instead of deleting rows:
--
--   events                      PARTITION BY LIST (expiring)
--     events_kept               expiring = false: every event that is not a message event
--                               (tenants, groups, members, users, ...): aggregates are folded
--                               from these streams, so they are never dropped; and read marks,
--                               a user's state rather than history
--     events_expiring           expiring = true: the other message events (message.*),
--                               PARTITION BY RANGE (occurred_at), one partition per UTC month
--       events_mYYYYMM          [first of the month, first of the next month)
--       events_expiring_default what no month partition takes yet (created later, see
--                               events_ensure_month, which moves such rows into a new month)
--
-- A unique constraint of a partitioned table must contain the partition key, so the keys that
-- must stay unique across months move to event_keys, one row per event, written in the same
-- statement as the event (commands/eventstore): (tenant_id, stream_id, stream_version), event_id
-- and the idempotency key. The constraints keep their old names, which the store maps to
-- domain.ErrConcurrency. When a month is dropped its keys go with it, except the highest key of
-- each stream, so a stream's version (a conversation's seq) never starts again at 1.
-- position stays the global append order and tx_id the commit-safe relay tail; both are copied.

-- +goose Up
ALTER TABLE events RENAME TO events_unpartitioned;
ALTER TABLE events_unpartitioned RENAME CONSTRAINT events_pkey TO events_unpartitioned_pkey;
ALTER TABLE events_unpartitioned RENAME CONSTRAINT events_event_id_key TO events_unpartitioned_event_id_key;
ALTER TABLE events_unpartitioned RENAME CONSTRAINT events_stream_version_key TO events_unpartitioned_stream_version_key;
ALTER INDEX events_idempotency_key RENAME TO events_unpartitioned_idempotency_key;
ALTER INDEX events_tx_position RENAME TO events_unpartitioned_tx_position;
ALTER INDEX events_replay RENAME TO events_unpartitioned_replay;
ALTER INDEX events_causation RENAME TO events_unpartitioned_causation;

CREATE TABLE events (
    position        bigint      GENERATED ALWAYS AS IDENTITY,
    tx_id           xid8        NOT NULL DEFAULT pg_current_xact_id(),
    event_id        uuid        NOT NULL,
    tenant_id       text        NOT NULL,
    stream_id       text        NOT NULL,
    stream_version  bigint      NOT NULL CHECK (stream_version > 0),
    event_type      text        NOT NULL,
    version         integer     NOT NULL,
    trace_id        text        NOT NULL DEFAULT '',
    correlation_id  text        NOT NULL DEFAULT '',
    causation_id    text        NOT NULL DEFAULT '',
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
    actor_key_id    text        NOT NULL DEFAULT '',
    -- A message event, kept only as long as its tenant's retention allows.
    expiring        boolean     NOT NULL DEFAULT false
) PARTITION BY LIST (expiring);

CREATE TABLE events_kept PARTITION OF events FOR VALUES IN (false);
CREATE TABLE events_expiring PARTITION OF events FOR VALUES IN (true) PARTITION BY RANGE (occurred_at);
CREATE TABLE events_expiring_default PARTITION OF events_expiring DEFAULT;

-- events_ensure_month creates the partition of the UTC month of m unless it exists, moving the
-- month's rows out of the default partition first. It returns whether it created one.
-- +goose StatementBegin
CREATE FUNCTION events_ensure_month(m timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    lo   timestamp   := date_trunc('month', m AT TIME ZONE 'UTC');
    hi   timestamp   := lo + interval '1 month';
    name text        := 'events_m' || to_char(lo, 'YYYYMM');
BEGIN
    IF to_regclass(name) IS NOT NULL THEN
        RETURN false;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('events_ensure_month'));
    IF to_regclass(name) IS NOT NULL THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM events_expiring_default
               WHERE occurred_at >= lo AT TIME ZONE 'UTC' AND occurred_at < hi AT TIME ZONE 'UTC') THEN
        EXECUTE format('CREATE TABLE %I (LIKE events_expiring INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name);
        EXECUTE format('WITH moved AS (DELETE FROM events_expiring_default WHERE occurred_at >= $1 AND occurred_at < $2 RETURNING *)
                        INSERT INTO %I SELECT * FROM moved', name)
            USING lo AT TIME ZONE 'UTC', hi AT TIME ZONE 'UTC';
        EXECUTE format('ALTER TABLE events_expiring ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
            name, lo AT TIME ZONE 'UTC', hi AT TIME ZONE 'UTC');
    ELSE
        EXECUTE format('CREATE TABLE %I PARTITION OF events_expiring FOR VALUES FROM (%L) TO (%L)',
            name, lo AT TIME ZONE 'UTC', hi AT TIME ZONE 'UTC');
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- A partition for every month that holds message events, and for this month and the next two.
SELECT events_ensure_month(m)
FROM (SELECT DISTINCT date_trunc('month', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS m
      FROM events_unpartitioned WHERE event_type LIKE 'message.%' AND event_type NOT LIKE 'message.%.read_marked.%'
      UNION SELECT now() UNION SELECT now() + interval '1 month' UNION SELECT now() + interval '2 months') AS months;

CREATE TABLE event_keys (
    tenant_id       text   NOT NULL,
    stream_id       text   NOT NULL,
    stream_version  bigint NOT NULL,
    event_id        uuid   NOT NULL,
    idempotency_key text   NULL,
    CONSTRAINT events_stream_version_key PRIMARY KEY (tenant_id, stream_id, stream_version),
    CONSTRAINT events_event_id_key UNIQUE (event_id)
);
CREATE UNIQUE INDEX events_idempotency_key ON event_keys (tenant_id, stream_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

INSERT INTO events OVERRIDING SYSTEM VALUE
SELECT *, event_type LIKE 'message.%' AND event_type NOT LIKE 'message.%.read_marked.%'
FROM events_unpartitioned ORDER BY position;
INSERT INTO event_keys (tenant_id, stream_id, stream_version, event_id, idempotency_key)
SELECT tenant_id, stream_id, stream_version, event_id, idempotency_key FROM events_unpartitioned;
SELECT setval(pg_get_serial_sequence('events', 'position'),
    coalesce((SELECT max(position) FROM events_unpartitioned), 0) + 1, false);
DROP TABLE events_unpartitioned;

-- The global append order, the relay's commit-safe tail, streams in version order, replays and
-- rebuilds by tenant and type, and the events of an admin command (as before, per partition).
CREATE INDEX events_position ON events (position);
CREATE INDEX events_tx_position ON events (tx_id, position);
CREATE INDEX events_stream ON events (tenant_id, stream_id, stream_version);
CREATE INDEX events_replay ON events (tenant_id, event_type, position);
CREATE INDEX events_causation ON events (tenant_id, causation_id) WHERE causation_id <> '';

-- +goose Down
CREATE TABLE events_unpartitioned (LIKE events INCLUDING DEFAULTS);
INSERT INTO events_unpartitioned SELECT * FROM events ORDER BY position;
DROP TABLE events;
DROP TABLE event_keys;
DROP FUNCTION events_ensure_month(timestamptz);
ALTER TABLE events_unpartitioned DROP COLUMN expiring;
ALTER TABLE events_unpartitioned RENAME TO events;
ALTER TABLE events ALTER COLUMN position ADD GENERATED ALWAYS AS IDENTITY;
SELECT setval(pg_get_serial_sequence('events', 'position'), coalesce((SELECT max(position) FROM events), 0) + 1, false);
ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (position);
ALTER TABLE events ADD CONSTRAINT events_event_id_key UNIQUE (event_id);
ALTER TABLE events ADD CONSTRAINT events_stream_version_key UNIQUE (tenant_id, stream_id, stream_version);
CREATE UNIQUE INDEX events_idempotency_key ON events (tenant_id, stream_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX events_tx_position ON events (tx_id, position);
CREATE INDEX events_replay ON events (tenant_id, event_type, position);
CREATE INDEX events_causation ON events (tenant_id, causation_id) WHERE causation_id <> '';
