-- The admin plane (DESIGN §4 "Admin commands", §5a): the tenant registry, account governance,
-- and the bookkeeping of the admin command consumer. The registry and account rows are written in
-- the same transaction as the events that change them (tenant.*, user.banned.v1, ...), so they
-- are the events' current state, never ahead of or behind the log.

-- +goose Up

-- The tenants that exist. A tenant is provisioned by `imledger tenant create` or the
-- tenant.provision command; no other tenant is served. not_before is the last suspension: the
-- tenant's tokens issued before it are refused.
CREATE TABLE tenants (
    tenant_id   text        PRIMARY KEY,
    status      text        NOT NULL CHECK (status IN ('active', 'suspended')),
    settings    jsonb       NOT NULL DEFAULT '{}',
    version     bigint      NOT NULL,
    not_before  timestamptz NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

-- Account governance of users that have any: banned, and the time before which the user's
-- tokens are refused.
CREATE TABLE account_status (
    tenant_id   text        NOT NULL,
    user_id     bigint      NOT NULL CHECK (user_id > 0),
    banned      boolean     NOT NULL,
    not_before  timestamptz NULL,
    version     bigint      NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, user_id)
);

-- One row per admin command a consumer group took (seed 004 §6.3: event_id + consumer_group).
-- status 'running' is a claim held by owner since claimed_at; the other statuses are final and
-- result is the answer published on im.admin.command.result, sent again for a redelivery.
CREATE TABLE admin_commands (
    consumer_group  text        NOT NULL,
    event_id        uuid        NOT NULL,
    parent_event_id uuid        NULL,
    tenant_id       text        NOT NULL,
    command_type    text        NOT NULL,
    status          text        NOT NULL CHECK (status IN ('running', 'succeeded', 'rejected', 'failed')),
    reason          text        NOT NULL DEFAULT '',
    result          json        NULL, -- json, not jsonb: a repeat is answered byte for byte
    owner           text        NOT NULL DEFAULT '',
    attempts        integer     NOT NULL DEFAULT 0,
    claimed_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz NULL,
    PRIMARY KEY (consumer_group, event_id)
);

-- Commands that kept failing (transient errors past the retry limit), per tenant, with the
-- command as received so `imledger deadletter replay` can send it again. status open until it is
-- replayed (replayed_event_id names the new command) or skipped.
CREATE TABLE admin_command_failures (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer_group    text        NOT NULL,
    tenant_id         text        NOT NULL,
    event_id          uuid        NOT NULL,
    command_type      text        NOT NULL,
    command           jsonb       NOT NULL,
    record_key        text        NOT NULL DEFAULT '',
    error             text        NOT NULL,
    attempts          integer     NOT NULL,
    status            text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'replayed', 'skipped')),
    replayed_event_id uuid        NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    resolved_at       timestamptz NULL,
    UNIQUE (consumer_group, event_id)
);
CREATE INDEX admin_command_failures_tenant ON admin_command_failures (tenant_id, status, id);

-- Events written by an admin command carry the command's event_id as causation_id; a consumer
-- that takes over a command whose first run was cut short finds them here instead of running it
-- again. Only admin commands set causation_id, so the index stays small.
CREATE INDEX events_causation ON events (tenant_id, causation_id) WHERE causation_id <> '';

-- +goose Down
DROP INDEX events_causation;
DROP TABLE admin_command_failures;
DROP TABLE admin_commands;
DROP TABLE account_status;
DROP TABLE tenants;
