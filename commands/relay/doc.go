// Package relay is the transactional outbox relay (DESIGN §4): it tails the event store in
// commit-safe (tx_id, position) order, publishes each batch of events to Kafka as one transaction
// and only then saves its checkpoint. One relay per name is active at a time, elected with a
// PostgreSQL advisory lock and fenced by a term: the checkpoint and markers are written only by
// the current term, and each term's transactional producer fences the previous one in Kafka. It
// republishes to a broker that lost acknowledged records, and its gap sweeper gives up
// conversation seqs that stay missing with seq-skip markers. Delivery is at-least-once;
// consumers dedupe by event_id.
package relay
