-- Accounts, tenant API keys and HTTP idempotency (DESIGN §6, seed 004 §6.2). These tables hold
-- secrets and request bookkeeping, never events: an account's public facts are the events of its
-- user stream, and nothing here is published.

-- +goose Up

-- One row per login name of a tenant. password_hash is an argon2id PHC string; the password itself
-- is never stored. confirmed turns true once the account's user.registered.v1 event is committed:
-- the row is written first (it claims the login), the event second, so a crash between the two
-- leaves an unconfirmed row that login refuses and a later registration of the same name reclaims.
CREATE TABLE credentials (
    tenant_id     text        NOT NULL,
    login         text        NOT NULL,
    user_id       bigint      NOT NULL CHECK (user_id > 0),
    password_hash text        NOT NULL,
    confirmed     boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, login),
    UNIQUE (tenant_id, user_id)
);

-- Tenant API keys: only the SHA-256 of a key is stored. A revoked key stays for the record.
CREATE TABLE tenant_api_keys (
    key_hash   bytea       PRIMARY KEY CHECK (octet_length(key_hash) = 32),
    tenant_id  text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz NULL
);
CREATE INDEX tenant_api_keys_tenant ON tenant_api_keys (tenant_id);

-- Idempotency-Key records of authenticated writes, kept until expires_at (24 h by default).
-- A row with status_code NULL is claimed by a request still running; a finished request stores
-- its status and answer, which a repeated request with the same key and body gets back verbatim.
CREATE TABLE http_idempotency (
    tenant_id     text        NOT NULL,
    user_id       bigint      NOT NULL,
    key           text        NOT NULL,
    request_hash  bytea       NOT NULL,
    status_code   integer     NULL,
    response_body jsonb       NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, user_id, key)
);
CREATE INDEX http_idempotency_expires ON http_idempotency (expires_at);

-- +goose Down
DROP TABLE http_idempotency;
DROP TABLE tenant_api_keys;
DROP TABLE credentials;
