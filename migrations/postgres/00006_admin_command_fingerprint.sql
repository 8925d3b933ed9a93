-- An admin command's fingerprint (sha-256 of its tenant_id, event_type and payload), written
-- with its claim: a record that reuses a claimed event_id for another tenant, command type or
-- payload is rejected event_id_reused instead of answered with the first command's result.
-- NULL for the claims made before it existed, which are not compared.

-- +goose Up
ALTER TABLE admin_commands ADD COLUMN fingerprint bytea NULL;

-- +goose Down
ALTER TABLE admin_commands DROP COLUMN fingerprint;
