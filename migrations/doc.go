// Package migrations embeds the SQL schema migrations of imledger and applies them with goose:
// postgres/ holds the event store (events, relay checkpoints), mysql/ the per-tenant read models.
// Each dialect has its own Up function; none of them touches goose's global state.
package migrations
