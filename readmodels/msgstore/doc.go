// Package msgstore is the MySQL message read model of one tenant: group and 1:1 messages, read
// marks, delete-for-me rows and the processed event ids that make projection idempotent. Apply is
// the only write path, shared by the live projector and a rebuild (which writes suffixed copies of
// the tables and swaps them in atomically); the read functions serve history and unread queries.
package msgstore
