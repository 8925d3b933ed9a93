// Package kafka is the Kafka wiring shared by the outbox relay, the Kafka consumers and the
// transports: the connection Config, the topic names of DESIGN §4 (with a configurable prefix),
// the mapping from an event category to its topic, topic creation, Sarama configurations for a
// safe producer, and the one runtime of every Sarama consumer group (RunGroup). It sits below
// every layer and imports none of them.
package kafka
