-- The verified phone number or e-mail address an account resets its password with. Like the
-- password hash, it is a credential kept outside the events: a row holds only the keyed hash of
-- the address (HMAC-SHA-256 under verify.hash_key, as commands/verify stores targets), never the
-- address; user.contact_changed.v1 records that it changed, with the channel alone. A new
-- verify.hash_key makes every row unusable until its user binds the contact again.

-- +goose Up
CREATE TABLE account_contacts (
    tenant_id   text        NOT NULL,
    user_id     bigint      NOT NULL CHECK (user_id > 0),
    channel     text        NOT NULL CHECK (channel IN ('sms', 'email')),
    target_hash text        NOT NULL,
    bound_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, user_id, channel)
);

-- +goose Down
DROP TABLE account_contacts;
