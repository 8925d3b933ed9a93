// Package kafkabroker runs an embedded Kafka-protocol broker (github.com/twmb/franz-go/pkg/kfake)
// inside the process, which `imledger serve` starts when no Kafka brokers are configured. It is for
// trying imledger on a laptop and for tests, not for production: it is one broker with no
// replication. With a data directory (serve's default) it keeps its log on disk and survives a
// killed process; without one it keeps everything in memory.
package kafkabroker
