package projections

import (
	"errors"
	"fmt"
	"time"

	tkafka "github.com/imledger/imledger/internal/kafka"
)

// Consumer group names of the projections. They are a contract: Kafka offsets are keyed by them,
// so a published name is never renamed. A read
// model whose meaning changes gets a new name (".v2") and is rebuilt.
const (
	// GroupMessagesMySQL is the consumer group of the messages-mysql projection.
	GroupMessagesMySQL = "imledger.proj.messages.mysql.v1"
	// GroupMessagesHot is the consumer group of the messages-hot projection.
	GroupMessagesHot = "imledger.proj.messages.hot.v1"
)

// Initial offsets a consumer group without committed offsets starts from.
const (
	OffsetOldest = "oldest"
	OffsetNewest = "newest"
)

// Config configures a Projector. The zero value plus Kafka.Brokers is a working configuration.
type Config struct {
	// Kafka says how to reach the brokers and which topic prefix to use. Brokers is required.
	Kafka tkafka.Config

	// InitialOffset is where a consumer group without committed offsets starts: OffsetOldest
	// (default) replays everything Kafka still holds, OffsetNewest skips history.
	InitialOffset string

	// Retry is the backoff of a failing event before it is dead-lettered.
	Retry RetryConfig

	// Batch controls how events of different partitions are grouped into one read-model
	// transaction.
	Batch BatchConfig

	// Parking configures the dead-letter and parking store in Postgres.
	Parking ParkingConfig

	// InFlight is how many records of one partition may be in the projector at once: decoded,
	// queued for a batch or being written, not yet acked. A conversation's events stay in order
	// whatever the value (see batcher); a deep pipeline lets one hot conversation fill whole
	// batches. Offsets are committed only up to the last record whose batch committed.
	// Default 512.
	InFlight int

	// ChannelBufferSize is how many fetched records the Kafka client buffers per partition.
	// A partition whose buffer is full holds up the next fetch for every partition of its
	// broker (Sarama's MaxProcessingTime), so a projector that applies slowly per partition
	// wants a deep buffer. Default 1024.
	ChannelBufferSize int

	// FetchLinger, when set, spaces the fetches of a projector of the message topics. Its fetch is
	// answered at the first record (and held for kafka.fetch_idle_wait when none comes, so an
	// idle projector polls that seldom); the first record of an answer is then held until it is
	// this old before the projector gets it, and the next fetch, which waits for it, carries what
	// arrived meanwhile and passes at once: an event waits up to FetchLinger after the relay
	// published it, and under light traffic a projector fetches about twice per FetchLinger
	// (see fetchLinger). Default 0: no hold; at light traffic the relay's linger (relay.Config.
	// Linger) already gathers the events of a window into one transaction, which a fetch takes
	// whole.
	FetchLinger time.Duration

	// NackResendSleep is how long the subscriber waits before redelivering an event whose
	// handler failed with a retryable error after the retries. Default 500ms.
	NackResendSleep time.Duration

	// LagInterval is how often the lag of each consumer group is measured. Default 5s.
	LagInterval time.Duration

	// CloseTimeout bounds how long Run waits for handlers in flight when it stops. Default 30s.
	CloseTimeout time.Duration
}

// RetryConfig is the retry schedule of one event (watermill's Retry middleware).
type RetryConfig struct {
	// MaxRetries is how often an event is retried after its first attempt before it goes to
	// the dead letters. Errors that wrap domain.ErrRetryable (a read-model store was
	// unreachable) are never dead-lettered: after MaxRetries the event is redelivered and the
	// schedule starts again, so the projection pauses until the store is back. Default 5.
	MaxRetries int
	// InitialInterval is the wait before the first retry. Default 100ms.
	InitialInterval time.Duration
	// MaxInterval caps the exponential backoff. Default 5s.
	MaxInterval time.Duration
	// Multiplier scales the interval after each retry. Default 2.
	Multiplier float64
}

// BatchConfig controls group commit. Each conversation is written by one flusher, in order; a
// batch holds what queued up for that flusher (many events of one conversation included) while
// its previous batch was written.
type BatchConfig struct {
	// MaxEvents caps the events of one read-model transaction. Default 500.
	MaxEvents int
	// Flushers is how many batches may be written at the same time; conversations are spread
	// over them by hash. Default 1: one writer makes batches of every conversation that queued
	// together, half as many read-model transactions as two at light load and cheaper at full
	// load on a node of two cores; more help where each write waits on a distant database.
	Flushers int
	// Linger is how long a flusher that took fewer than MaxEvents events may wait for more
	// before writing them; it stops waiting once no event came for Linger/8. Under load it
	// trades a few milliseconds of read-model lag for far fewer, larger read-model transactions,
	// which leaves the CPU, Redis and the databases to the send path. A negative value writes
	// what is queued at once. Default 10ms.
	Linger time.Duration
}

// ParkingConfig configures the dead letters and parked events in Postgres.
type ParkingConfig struct {
	// DrainBatch is how many parked events a replay or skip applies per read-model call.
	// Default 500.
	DrainBatch int
}

func (c *Config) setDefaults() {
	if c.InitialOffset == "" {
		c.InitialOffset = OffsetOldest
	}
	c.Retry.setDefaults()
	if c.Batch.MaxEvents == 0 {
		c.Batch.MaxEvents = 500
	}
	if c.Batch.Flushers == 0 {
		c.Batch.Flushers = 1
	}
	if c.Batch.Linger == 0 {
		c.Batch.Linger = 10 * time.Millisecond
	}
	c.Parking.setDefaults()
	if c.InFlight == 0 {
		c.InFlight = 512
	}
	if c.ChannelBufferSize == 0 {
		c.ChannelBufferSize = 1024
	}
	if c.NackResendSleep == 0 {
		c.NackResendSleep = 500 * time.Millisecond
	}
	if c.LagInterval == 0 {
		c.LagInterval = 5 * time.Second
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = 30 * time.Second
	}
}

func (c *RetryConfig) setDefaults() {
	if c.MaxRetries == 0 {
		c.MaxRetries = 5
	}
	if c.InitialInterval == 0 {
		c.InitialInterval = 100 * time.Millisecond
	}
	if c.MaxInterval == 0 {
		c.MaxInterval = 5 * time.Second
	}
	if c.Multiplier == 0 {
		c.Multiplier = 2
	}
}

func (c *ParkingConfig) setDefaults() {
	if c.DrainBatch == 0 {
		c.DrainBatch = 500
	}
}

// Validate reports every problem of c, with defaults applied to unset fields, joined into one
// error; nil means c can be used.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if err := c.Kafka.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("projections: %w", err))
	}
	if c.InitialOffset != OffsetOldest && c.InitialOffset != OffsetNewest {
		errs = append(errs, fmt.Errorf("projections: initial offset %q, want %q or %q", c.InitialOffset, OffsetOldest, OffsetNewest))
	}
	if c.Retry.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("projections: retry: max retries %d, want >= 0", c.Retry.MaxRetries))
	}
	if c.Retry.InitialInterval < 0 || c.Retry.MaxInterval < c.Retry.InitialInterval {
		errs = append(errs, errors.New("projections: retry: want 0 <= initial interval <= max interval"))
	}
	if c.Retry.Multiplier < 1 {
		errs = append(errs, fmt.Errorf("projections: retry: multiplier %v, want >= 1", c.Retry.Multiplier))
	}
	if c.Batch.MaxEvents < 1 || c.Batch.Flushers < 1 {
		errs = append(errs, errors.New("projections: batch: max events and flushers must be >= 1"))
	}
	if c.Batch.Linger > time.Second {
		errs = append(errs, errors.New("projections: batch: linger must be at most 1s"))
	}
	if c.Parking.DrainBatch < 1 {
		errs = append(errs, errors.New("projections: parking: drain batch must be >= 1"))
	}
	if c.FetchLinger < 0 || c.FetchLinger > 10*time.Second {
		errs = append(errs, fmt.Errorf("projections: fetch linger %s, want within [0, 10s]", c.FetchLinger))
	}
	if c.InFlight < 1 {
		errs = append(errs, fmt.Errorf("projections: in flight %d, want >= 1", c.InFlight))
	}
	if c.ChannelBufferSize < 1 {
		errs = append(errs, fmt.Errorf("projections: channel buffer size %d, want >= 1", c.ChannelBufferSize))
	}
	if c.NackResendSleep < 0 || c.LagInterval <= 0 || c.CloseTimeout <= 0 {
		errs = append(errs, errors.New("projections: nack resend sleep must be >= 0, lag interval and close timeout > 0"))
	}
	return errors.Join(errs...)
}
