package domain

import "time"

// EventFilter selects events of the log for replays and rebuilds. Every set field narrows the
// selection; the zero EventFilter selects every event. The event store (commands/eventstore)
// implements it; readers such as the projections' rebuilds name it without importing the store.
type EventFilter struct {
	// Tenant keeps one tenant's events; zero means all tenants.
	Tenant TenantID
	// EventTypes keeps events stored under these type names; empty means all types. Reads
	// that upcast return old versions as current ones, so a reader that selects a type lists
	// every version of it (Versions).
	EventTypes []EventType
	// StreamPrefix keeps events whose stream id starts with it; empty means all streams.
	StreamPrefix string
	// Since keeps events that occurred at or after it; zero means no lower bound.
	Since time.Time
	// Until keeps events that occurred before it; zero means no upper bound.
	Until time.Time
}
