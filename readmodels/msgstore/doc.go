// Package msgstore is the MySQL message read model of one tenant: group and 1:1 messages, read
// marks and delete-for-me rows, every write idempotent by itself. Apply is the write path of the
// live projector; a rebuild fills suffixed copies of the tables with a BulkLoad (the same rows,
// secondary indexes added at the end) and swaps them in atomically. The read functions serve history and unread queries.
package msgstore
