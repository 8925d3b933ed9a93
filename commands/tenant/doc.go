// Package tenant is the tenant registry (DESIGN §5a): the tenants that exist, their status and
// settings, kept as events on each tenant's lifecycle stream and mirrored in the PostgreSQL table
// tenants in the same transaction. Cache is the in-process copy every node checks requests
// against, refreshed periodically and at once when a tenant changes.
package tenant
