// Package relay is the transactional outbox relay (DESIGN §4): it tails the event store in
// commit-safe (tx_id, position) order, publishes each batch of events to Kafka with one batch
// send, waits for the acks and only then saves its checkpoint. One relay per name is active at a
// time, elected with a PostgreSQL advisory lock. Delivery is at-least-once; consumers dedupe by
// event_id.
package relay
