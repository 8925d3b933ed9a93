-- The tenant registry keeps each tenant's retention horizon (tenant.retention_applied.v1,
-- docs/retention.md): its messages that occurred before it were removed from the read models, and
-- projections and rebuilds skip them. NULL: retention never ran for the tenant.

-- +goose Up
ALTER TABLE tenants ADD COLUMN retained_before timestamptz NULL;

-- +goose Down
ALTER TABLE tenants DROP COLUMN retained_before;
