// Package seq allocates message seqs and guards send idempotency in Redis (DESIGN §4, seed 000
// §5.4): one Lua script claims `…:uniq:msg:<from>:<client_msg_id>` with SET NX semantics and only
// then INCRs the topic's `…:last_seq`. A missing counter is never invented: the caller seeds it
// from the event store, which stays the final word on uniqueness.
package seq
