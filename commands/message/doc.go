// Package message is the write side of messages: sending, recall, edit, delete-for-me, read and
// receive marks and moderation, each checked and decided here and appended to the event store
// (commands/eventstore). SendMessage allocates seqs and guards idempotency in Redis (commands/seq)
// and group-commits sends per topic partition, so a conversation's seq order is its commit order.
package message
