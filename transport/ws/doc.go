// Package ws is the WebSocket gateway at /v1/im/ws (DESIGN §6): JSON frames in the style of
// Tinode over gobwas/ws, one reader and one writer goroutine per connection, a bounded send queue
// that never blocks the sender, and a per-node hub of topic subscriptions fed by fanout.
package ws
