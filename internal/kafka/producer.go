package kafka

import (
	"fmt"

	"github.com/IBM/sarama"
	"github.com/rcrowley/go-metrics"
)

// Sarama records client metrics (request rates, sizes, latencies) in go-metrics histograms on
// every request and fetch; nothing here reads them, and on a busy consumer they cost a few
// percent of a core. Nil metrics make every update a no-op.
func init() { metrics.UseNilMetrics = true }

// NewSaramaConfig returns the Sarama configuration shared by every imledger Kafka client
// (producer, consumers, cluster admin): client id, protocol version and timeouts. Consumers read
// with isolation level read_committed: the relay publishes each batch in a Kafka transaction, and
// a deposed relay's aborted batch must stay invisible. It fails if cfg is invalid.
func NewSaramaConfig(cfg Config) (*sarama.Config, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	sc := sarama.NewConfig()
	sc.ClientID = cfg.ClientID
	v, err := sarama.ParseKafkaVersion(cfg.Version)
	if err != nil {
		return nil, fmt.Errorf("kafka: version: %w", err)
	}
	sc.Version = v
	sc.Net.DialTimeout = cfg.DialTimeout
	sc.Net.ReadTimeout = 3 * cfg.DialTimeout
	sc.Net.WriteTimeout = 3 * cfg.DialTimeout
	sc.Admin.Timeout = cfg.AdminTimeout
	sc.Metadata.AllowAutoTopicCreation = false
	sc.Consumer.IsolationLevel = sarama.ReadCommitted
	sc.Consumer.Fetch.Min = 1                   // a record is answered at once...
	sc.Consumer.MaxWaitTime = cfg.FetchIdleWait // ...and an idle consumer polls this seldom
	return sc, nil
}

// NewProducerConfig returns a Sarama configuration for a safe producer, suitable for
// sarama.NewSyncProducer:
//
//   - acks from all in-sync replicas (WaitForAll) before a send counts as done;
//   - idempotent, with one request in flight per broker connection, so a retried request can
//     neither duplicate nor reorder records within a partition;
//   - keyed records go to partition (murmur2(key) & 0x7fffffff) % partitions, the formula of
//     the Kafka Java client's default partitioner, so producers in any language agree on where
//     a conversation lives;
//   - successes and errors are returned, as a SyncProducer requires.
//
// It fails if cfg is invalid.
func NewProducerConfig(cfg Config) (*sarama.Config, error) {
	sc, err := NewSaramaConfig(cfg)
	if err != nil {
		return nil, err
	}
	cfg.setDefaults()
	p := &sc.Producer
	p.RequiredAcks = sarama.WaitForAll
	p.Idempotent = true
	sc.Net.MaxOpenRequests = 1
	p.Retry.Max = cfg.ProduceRetries
	p.Timeout = cfg.ProduceTimeout
	p.Partitioner = sarama.NewMurmur2Partitioner
	if err := p.Compression.UnmarshalText([]byte(cfg.Compression)); err != nil {
		return nil, fmt.Errorf("kafka: compression: %w", err)
	}
	p.MaxMessageBytes = cfg.MaxMessageBytes
	p.Flush.Messages = cfg.FlushMessages
	p.Flush.Bytes = cfg.FlushBytes
	p.Flush.Frequency = cfg.FlushFrequency
	p.Return.Successes = true
	p.Return.Errors = true
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("kafka: producer config: %w", err)
	}
	return sc, nil
}

// NewSyncProducer connects a synchronous producer configured by NewProducerConfig. The caller
// closes it. It fails if cfg is invalid or no broker answers.
func NewSyncProducer(cfg Config) (sarama.SyncProducer, error) {
	sc, err := NewProducerConfig(cfg)
	if err != nil {
		return nil, err
	}
	p, err := sarama.NewSyncProducer(cfg.Brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("kafka: connect producer to %v: %w", cfg.Brokers, err)
	}
	return p, nil
}
