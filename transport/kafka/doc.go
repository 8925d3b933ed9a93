// Package kafka is the Kafka wiring shared by the outbox relay and the Kafka consumers: the
// connection Config, the topic names of DESIGN §4 (with a configurable prefix), the mapping from
// an event category to its topic, topic creation, and Sarama configurations for a safe producer.
package kafka
