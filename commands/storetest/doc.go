// Package storetest builds, for tests, what the write side stands on: a migrated PostgreSQL
// event store in an isolated database (see internal/testenv), registered users, a provisioned
// tenant. It lives under commands because it builds commands' adapters; internal/testenv knows
// only the shared services and no layer.
package storetest
