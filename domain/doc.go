// Package domain is the imledger model: identifiers and value objects (tenant, user, topic, seq),
// message content, the event envelope with explicit versioned event type names, and domain errors.
// It does no I/O and imports only the standard library and uuid.
package domain
