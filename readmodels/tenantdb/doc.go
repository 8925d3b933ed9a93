// Package tenantdb routes a tenant to its own MySQL database (im_t_<tenant> by default): it creates
// and migrates the database when a tenant is provisioned and keeps one lazily opened connection
// pool per tenant, with a cap on idle connections so many quiet tenants cost little, and evicts a
// pool nobody used for Config.PoolIdleTimeout. It also classifies server errors: transient ones
// (retry) and values the server refuses (IsDataError).
package tenantdb
