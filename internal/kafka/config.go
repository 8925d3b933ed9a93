package kafka

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// Config says how to reach Kafka and how imledger's topics and producers are set up. The zero
// value plus Brokers is a working configuration; every other field has a default.
type Config struct {
	// Brokers are the seed broker addresses ("host:port"). Required.
	Brokers []string

	// TopicPrefix is prepended to every topic name, e.g. "staging." gives
	// "staging.im.message.persist". Default "" (no prefix). Only the characters Kafka allows in
	// topic names ([a-zA-Z0-9._-]) are accepted.
	TopicPrefix string

	// Partitions is the partition count of topics created by EnsureTopics. Default 64. Existing
	// topics are never altered, so a changed count (or default) applies to new topics only.
	//
	// It bounds the parallelism of each consumer group. A projector holds one record of each
	// partition in flight (a partition's next record is handed over only after the previous one
	// is written and acknowledged), so a projection applies at most about one event per
	// partition per read-model transaction, and the partition that the busiest conversations
	// hash to sets the pace: with a hundred busy conversations, 12 partitions leave one of them
	// a tenth of all events, 64 partitions about a twenty-fifth. More partitions cost more
	// broker memory and open files, longer consumer-group rebalances, smaller producer batches
	// per partition, and more memory in a consumer that is far behind, which buffers fetched
	// records per partition.
	Partitions int32

	// ReplicationFactor is the replication factor of topics created by EnsureTopics. Default 1,
	// which suits a single broker; use 3 on a production cluster.
	ReplicationFactor int16

	// ClientID is the Kafka client id, visible in broker logs and quotas. Default "imledger".
	ClientID string

	// Version is the lowest Kafka protocol version the brokers speak, e.g. "3.6.0". Default
	// "2.8.0". Record headers and the idempotent producer need at least "0.11.0".
	Version string

	// Compression is the producer's compression codec: "none" (default), "gzip", "snappy",
	// "lz4" or "zstd".
	Compression string

	// MaxMessageBytes caps one message and the uncompressed size of one partition's batch in a
	// produce request. Default 1000000, just under the broker's default message.max.bytes.
	MaxMessageBytes int

	// FlushMessages, FlushBytes and FlushFrequency are the producer's best-effort batching
	// triggers (Sarama Producer.Flush). The defaults (0, 0, 0) send as soon as possible and put
	// everything that arrives while a request is in flight into the next request, which is what a
	// relay publishing whole batches wants.
	FlushMessages int
	// FlushBytes: see FlushMessages.
	FlushBytes int
	// FlushFrequency: see FlushMessages.
	FlushFrequency time.Duration

	// ProduceTimeout is how long the broker may wait for all in-sync replicas to acknowledge a
	// produce request. Default 10s.
	ProduceTimeout time.Duration

	// ProduceRetries is how often the producer retries a retriable produce error before it
	// reports the message as failed. Default 5.
	ProduceRetries int

	// DialTimeout bounds connecting to a broker; reads and writes get three times as long.
	// Default 10s.
	DialTimeout time.Duration

	// AdminTimeout bounds one cluster-admin operation such as creating a topic. Default 10s.
	AdminTimeout time.Duration

	// FetchIdleWait is how long the broker may hold a consumer's fetch that finds no record (the
	// consumers of this config answer a record at once: the admin commands, push tasks, file
	// checks, the tenant configuration; the projectors have settings of their own). It costs no
	// latency, only the idle consumer's polls, one per FetchIdleWait. At most a third of three
	// times DialTimeout, the read timeout of a fetch. Default 2s, or DialTimeout when that is shorter.
	FetchIdleWait time.Duration
}

func (c *Config) setDefaults() {
	if c.Partitions == 0 {
		c.Partitions = 64
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = 1
	}
	if c.ClientID == "" {
		c.ClientID = "imledger"
	}
	if c.Version == "" {
		c.Version = "2.8.0"
	}
	if c.Compression == "" {
		c.Compression = "none"
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 1_000_000
	}
	if c.ProduceTimeout == 0 {
		c.ProduceTimeout = 10 * time.Second
	}
	if c.ProduceRetries == 0 {
		c.ProduceRetries = 5
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 10 * time.Second
	}
	if c.AdminTimeout == 0 {
		c.AdminTimeout = 10 * time.Second
	}
	if c.FetchIdleWait == 0 {
		c.FetchIdleWait = min(2*time.Second, c.DialTimeout)
	}
}

// WithDefaults returns c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	c.setDefaults()
	return c
}

// Validate reports every problem of c, with defaults applied to unset fields, joined into one
// error; nil means c can be used.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("kafka: brokers: at least one address is required"))
	}
	for _, b := range c.Brokers {
		if strings.TrimSpace(b) == "" {
			errs = append(errs, errors.New("kafka: brokers: empty address"))
		}
	}
	if err := validTopicChars(c.TopicPrefix); err != nil {
		errs = append(errs, fmt.Errorf("kafka: topic prefix: %w", err))
	}
	if len(c.TopicPrefix) > 200 {
		errs = append(errs, errors.New("kafka: topic prefix: longer than 200 characters"))
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("kafka: partitions: %d, want >= 1", c.Partitions))
	}
	if c.ReplicationFactor < 1 {
		errs = append(errs, fmt.Errorf("kafka: replication factor: %d, want >= 1", c.ReplicationFactor))
	}
	v, err := sarama.ParseKafkaVersion(c.Version)
	if err != nil {
		errs = append(errs, fmt.Errorf("kafka: version: %w", err))
	} else if !v.IsAtLeast(sarama.V0_11_0_0) {
		errs = append(errs, fmt.Errorf("kafka: version: %s, want >= 0.11.0 (headers, idempotent producer)", c.Version))
	}
	var codec sarama.CompressionCodec
	if err := codec.UnmarshalText([]byte(c.Compression)); err != nil {
		errs = append(errs, fmt.Errorf("kafka: compression: %w", err))
	}
	if c.MaxMessageBytes < 1 || c.MaxMessageBytes >= int(sarama.MaxRequestSize) {
		errs = append(errs, fmt.Errorf("kafka: max message bytes: %d, want 1..%d", c.MaxMessageBytes, sarama.MaxRequestSize-1))
	}
	if c.FlushMessages < 0 || c.FlushBytes < 0 || c.FlushFrequency < 0 {
		errs = append(errs, errors.New("kafka: flush settings must not be negative"))
	}
	if c.ProduceTimeout < time.Millisecond || c.DialTimeout < time.Millisecond || c.AdminTimeout < time.Millisecond {
		errs = append(errs, errors.New("kafka: timeouts must be at least 1ms"))
	}
	if c.FetchIdleWait < time.Millisecond || c.FetchIdleWait > c.DialTimeout {
		errs = append(errs, fmt.Errorf("kafka: fetch idle wait %s: want 1ms..dial_timeout (%s)", c.FetchIdleWait, c.DialTimeout))
	}
	if c.ProduceRetries < 1 {
		errs = append(errs, fmt.Errorf("kafka: produce retries: %d, want >= 1", c.ProduceRetries))
	}
	return errors.Join(errs...)
}

func validTopicChars(s string) error {
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("%q: character %q is not allowed in a Kafka topic name", s, r)
		}
	}
	return nil
}
