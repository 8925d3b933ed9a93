// Package commands is the write side of imledger: one handler per command that checks the command,
// decides its events and appends them to the event store (commands/eventstore). SendMessage
// allocates seqs and guards idempotency in Redis (commands/seq) and group-commits sends per topic
// partition, so a conversation's seq order is its commit order.
package commands
