// Package fanout delivers committed messages and ephemeral notes to the online sessions of a
// topic across nodes: the sending node delivers to its own sessions and publishes once to each
// other node that has online members of the topic, over a Redis Pub/Sub channel per node
// (DESIGN §6, seed 000 §5.4). Delivery is best effort by design; clients recover by seq.
package fanout
