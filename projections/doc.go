// Package projections runs the read side of imledger: Kafka consumers (one watermill router per
// process, one consumer group per read model) that turn message events into the MySQL and Redis
// read models, with consumer idempotency, retry with backoff, dead letters that park the rest
// of their conversation, and lag metrics. Rebuilding a read model from the Postgres event store,
// and verifying it against a rebuild, is the job of package replay, which reads the events each
// projection accepts.
//
// Delivery. PipelinedSubscriber keeps up to Config.InFlight records of each partition in flight
// and commits an offset only once its record and all before it are settled. Each conversation is
// written by one flusher, in order, many events per batch (Config.Batch); a record is acked only
// after its batch committed. A conversation whose event failed holds its later events until the
// failed one applies or is dead-lettered. A redelivery changes nothing because every read-model
// write is idempotent by itself (unique keys and version guards in MySQL, compare-and-set in
// Redis).
//
// Failures. A store that is unreachable (domain.ErrRetryable) pauses the conversations it
// failed: their events are retried in order with backoff until they apply, never dead-lettered. A value the
// store refuses in one event (content MySQL will not hold: invalid or too deeply nested JSON,
// bad UTF-8, too long) is no failure at all: the read model stores that message as a
// placeholder (status blocked, no content) and the conversation goes on; rebuilds do the same.
// Any other failure is retried Config.Retry.MaxRetries times; a record that is not an envelope,
// an unknown event type, a payload the read model cannot place (no seq, wrong topic) or an
// unknown tenant is not retried at all. Then the record goes to im.dead.letter (with reason, consumer group and original
// coordinates as headers) and to projection_dead_letters in Postgres, and every later event of
// the same conversation in the same consumer group is parked in projection_parked_events until
// an operator replays or skips the dead letter (DeadLetters), which applies the parked events in
// order. Other conversations keep flowing.
//
// The Postgres tables are created by the goose migration 00003_projections (EnsureSchema applies
// the pending migrations).
package projections
