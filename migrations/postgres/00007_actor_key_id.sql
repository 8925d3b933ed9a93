-- The producer key an admin command was verified with (DESIGN §7a): the events the command
-- appends carry it as actor.key_id beside the key's identity in actor_type/actor_id. Empty for
-- every other event.

-- +goose Up
ALTER TABLE events ADD COLUMN actor_key_id text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE events DROP COLUMN actor_key_id;
