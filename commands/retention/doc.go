// Package retention is the retention job (DESIGN §7a, docs/retention.md): for each tenant with a
// retention_months setting it removes the message history older than the tenant's horizon from
// the read models, destroys the tenant's month keys before it, and records the horizon with
// tenant.retention_applied.v1; it keeps the month partitions of the event store made ahead and
// drops a month once every tenant in it has passed it and the relay has published all of it.
package retention
