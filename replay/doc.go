// Package replay reads the committed event log back, in position order, for everything that is
// not a live projection: `imledger replay` rebuilds a read model from the PostgreSQL event store
// or verifies it against a rebuild, and the sub-packages export the log for analysts (export)
// and re-emit it to a replay topic (republish).
//
// Every MySQL read model is rebuilt and verified by one generic Rebuilder over its Model (reset a
// copy, apply batches of events to it, checksum it, swap it in or drop it), with the live
// projection's event filter; messages-hot, which lives in Redis, is re-applied in place and
// verified in a scratch copy by the same pass over the log (HotRebuilder).
package replay
