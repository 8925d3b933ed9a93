// Package access is what the edges check every request against: the tenant registry's cache and
// the account governance guard, combined into the Gate of the REST API and the WebSocket gateway,
// plus the cross-node half of tenant and account changes: the Notifier that broadcasts them over
// the fanout and the Deliverer that applies them on every node before the sessions hear of them.
package access
