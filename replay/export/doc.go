// Package export takes events out of the PostgreSQL event store for analysts: a tenant's history
// (or every tenant's) in commit order, as JSON Lines or Apache Parquet, into a file, a directory
// of rotated part files or a stream, with a resumable cursor. It reads the same commit-safe tail
// as the relay (eventstore.ScanCommitted below a fixed horizon), so consecutive exports from the
// cursor see every committed event exactly once, however transactions interleaved; memory stays
// bounded by a few pages of events whatever the size of the history.
package export
