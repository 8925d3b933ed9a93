// Package eventstore is the PostgreSQL event store of the write side (DESIGN §4): optimistic
// appends to streams, the group-commit batch append of the send path, seq-skip markers, stream and
// replay reads, and the commit-safe (tx_id, position) tail with term-fenced checkpoints and NOTIFY
// wake-ups for the relay.
// Errors wrap the domain sentinels (ErrConcurrency, ErrNotFound, ErrInvalid, ErrRetryable); SQL
// errors never leave the package unwrapped.
package eventstore
