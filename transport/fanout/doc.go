// Package fanout delivers committed messages, ephemeral notes and control messages (a member
// removed, a peer blocked: subscriptions to end at once) to the online sessions of a topic across
// nodes: the sending node delivers to its own sessions and publishes once to each other node
// that has online members of the topic, over a Redis Pub/Sub channel per node (DESIGN §6, seed
// 000 §5.4); control messages that end subscriptions go to every node on the broadcast channel.
// Delivery is best effort by design; clients recover by seq.
package fanout
