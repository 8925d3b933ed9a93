// Package presence keeps who is online, on which node, and which users of a topic are online on
// which node, in Redis (seed 000 §5.1, DESIGN §5). Every node writes its own sessions; any node
// reads everyone's. Entries carry deadlines refreshed by heartbeats, so a crashed node's users go
// offline within one TTL without anyone cleaning up after it.
package presence
