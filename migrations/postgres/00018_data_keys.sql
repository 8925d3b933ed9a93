-- Data keys of crypto-shredding (DESIGN §7a): one AES-256 key per tenant, author and month
-- ("YYYY-MM", UTC), under which the author's personal content in events is sealed. A row holds
-- the key only wrapped by the tenant key of the keeper (shred.keeper_url / shred.local_key),
-- never in clear. Destroying a key sets wrapped to NULL for good: what it sealed reads as erased
-- everywhere. The row stays, so the key is never created again. An erased user also gets the row
-- of month '*', which refuses every new key of that user.

-- +goose Up
CREATE TABLE data_keys (
    tenant_id    text        NOT NULL,
    user_id      bigint      NOT NULL CHECK (user_id > 0),
    month        text        NOT NULL CHECK (month ~ '^([0-9]{4}-[0-9]{2}|\*)$'),
    wrapped      bytea       NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    destroyed_at timestamptz NULL,
    PRIMARY KEY (tenant_id, user_id, month),
    CHECK ((wrapped IS NULL) = (destroyed_at IS NOT NULL))
);

-- +goose Down
DROP TABLE data_keys;
