// Package kafkabroker runs an embedded Kafka-protocol broker (github.com/twmb/franz-go/pkg/kfake)
// inside the process, which `imledger serve` starts when no Kafka brokers are configured. It is for
// trying imledger on a laptop and for tests, not for production: it is one broker with no
// replication, and without a data directory it keeps everything in memory.
package kafkabroker
