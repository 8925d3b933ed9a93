-- Trust and erasure in the admin plane (DESIGN §7a).
--
-- The producer key an admin command was verified with: the events the command appends carry it
-- as actor.key_id beside the key's identity in actor_type/actor_id. Empty for every other event.
--
-- No secret at rest: the failures recorded before this version kept their commands verbatim, so
-- a failed user.reset_password held its password. Its payload's password (a key of any case) is
-- replaced by the redaction marker; a payload that is not an object, and a record kept as base64
-- because it was not JSON, are replaced by the marker whole. Such a failure cannot be replayed
-- (send the command again).

-- +goose Up
ALTER TABLE events ADD COLUMN actor_key_id text NOT NULL DEFAULT '';

UPDATE admin_command_failures f
SET command = (
    SELECT coalesce(jsonb_object_agg(k, CASE
        WHEN lower(k) = 'payload' AND jsonb_typeof(v) = 'object' THEN (
            SELECT coalesce(jsonb_object_agg(pk, CASE WHEN lower(pk) = 'password' THEN '{"redacted": true}'::jsonb ELSE pv END), '{}'::jsonb)
            FROM jsonb_each(v) AS p(pk, pv))
        WHEN lower(k) IN ('payload', 'record_base64') THEN '{"redacted": true}'::jsonb
        ELSE v END), '{}'::jsonb)
    FROM jsonb_each(f.command) AS e(k, v))
WHERE f.command_type = 'user.reset_password' AND jsonb_typeof(f.command) = 'object';

-- +goose Down
ALTER TABLE events DROP COLUMN actor_key_id;
