package message

import "github.com/imledger/imledger/commands/seq"

// Queued returns how many sends wait in h's partition queues.
func Queued(h *SendMessageHandler) int {
	n := 0
	for _, p := range h.parts {
		n += len(p.queue)
	}
	return n
}

// AllocatorOf returns h's seq allocator, which names h's process in the claims it takes.
func AllocatorOf(h *SendMessageHandler) *seq.Allocator { return h.seqs.(*seq.Allocator) }
