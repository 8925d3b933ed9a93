// Package hot is the Redis side of the message read model: 24-hour hot message snapshots of group
// topics (seed 000 §5.4) and their seq-skip markers, each topic's last projected seq and
// watermark, and each user's read seqs. Every write is an embedded Lua script that only moves
// state forward, so applying an event twice, or a stale event late, changes nothing and a
// recalled message's content never comes back.
package hot
