// Package ws is the WebSocket gateway at /v1/im/ws (DESIGN §6): JSON frames in the style of
// Tinode over gobwas/ws, one reader and one writer goroutine per connection, a bounded send queue
// that never blocks the sender, and a per-node hub of topic subscriptions fed by fanout.
//
// The protocol (every frame, the changes of a topic, ended sessions and broadcasts, the per-user
// channel "me", delivery and recovery, connection limits and close codes) is described once, for
// client developers, in the "WebSocket protocol" section of docs/clients.md. asyncapi.json
// (served at AsyncAPIPath, /asyncapi.json) is its AsyncAPI 3.0 document, with every frame, code,
// param and reason; asyncapi_internal_test.go and a test against a real serve hold the frames
// to it.
//
// Inside the package: the Gateway upgrades connections and runs the sessions; the Hub keeps this
// node's subscriptions per topic and, per group topic, the channel sessions that watch it (the
// user's groups, read from ChannelState at the sub of "me", corrected by the log's last items and
// followed through joined, left, removed and dissolved items and the control messages that end
// subscriptions), and for each session the 1:1 topics whose peer blocks the user. Changes of a
// topic reach every node, not only those with online members of it, so a sub on a node that had
// none is caught as well; on a node whose policies cache states (Invalidating), a change marks the
// states it concerns stale before the Hub applies it, so a later sub is never answered from what
// was cached before it.
package ws
