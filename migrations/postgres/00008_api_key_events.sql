-- Tenant API keys become the read model of their events (DESIGN §7a "Every write an event"):
-- tenant.api_key_created.v1 and tenant.api_key_revoked.v1 on the stream tenant/api_key/<sha256>,
-- written in the transaction that writes the key's row. The keys created before are recorded here
-- as those events, so that the log holds every key and `imledger replay --projection
-- tenant-api-keys` rebuilds the table from it. The events carry the key's id and SHA-256, never
-- the key (which was never stored). The relay publishes them on im.config.event like any other.

-- +goose Up
INSERT INTO events (event_id, tenant_id, stream_id, stream_version, event_type, version, source_service,
                    biz_type, biz_id, actor_type, actor_id, occurred_at, payload)
SELECT gen_random_uuid(), k.tenant_id, 'tenant/api_key/' || encode(k.key_hash, 'hex'), 1, 'tenant.api_key_created.v1', 1,
       'imledger', 'tenant', k.tenant_id, 'system', 'imledger', k.created_at,
       jsonb_build_object('key_id', substr(encode(k.key_hash, 'hex'), 1, 12), 'key_sha256', encode(k.key_hash, 'hex'),
                          'created_at', to_char(k.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
FROM tenant_api_keys k
WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.tenant_id = k.tenant_id AND e.stream_id = 'tenant/api_key/' || encode(k.key_hash, 'hex'))
ORDER BY k.created_at, k.key_hash;

INSERT INTO events (event_id, tenant_id, stream_id, stream_version, event_type, version, source_service,
                    biz_type, biz_id, actor_type, actor_id, occurred_at, payload)
SELECT gen_random_uuid(), k.tenant_id, 'tenant/api_key/' || encode(k.key_hash, 'hex'), 2, 'tenant.api_key_revoked.v1', 1,
       'imledger', 'tenant', k.tenant_id, 'system', 'imledger', k.revoked_at,
       jsonb_build_object('key_id', substr(encode(k.key_hash, 'hex'), 1, 12), 'key_sha256', encode(k.key_hash, 'hex'),
                          'revoked_at', to_char(k.revoked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
FROM tenant_api_keys k
WHERE k.revoked_at IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM events e WHERE e.tenant_id = k.tenant_id
                  AND e.stream_id = 'tenant/api_key/' || encode(k.key_hash, 'hex') AND e.stream_version = 2)
ORDER BY k.revoked_at, k.key_hash;

-- +goose Down
-- The events stay: the log is never rewritten, and the table is their read model either way.
SELECT 1;
