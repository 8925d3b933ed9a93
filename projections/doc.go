// Package projections runs the read side of imledger: Kafka consumers (one watermill router per
// process, one handler and consumer group per read model) that turn message events into the
// MySQL and Redis read models, with consumer idempotency, retry with backoff, dead letters that
// park the rest of their conversation, lag metrics, and rebuilds of a read model from the
// Postgres event store.
package projections
