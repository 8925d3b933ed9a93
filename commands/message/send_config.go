package message

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/domain"
)

// SendMessageConfig configures a SendMessageHandler. The zero value is usable.
type SendMessageConfig struct {
	// MaxContentBytes limits a message's serialized content. Default domain.DefaultMaxContentBytes.
	MaxContentBytes int
	// Partitions is the number of sequencer goroutines. Every topic is routed to one of them by
	// hash, and each partition commits one batch at a time, so it needs one database connection:
	// the store's pool should hold at least Partitions connections. Fewer partitions make larger
	// batches and fewer transactions; more hide database latency when the database has cores to
	// spare. Default GOMAXPROCS, at least 2 (on two cores 2 partitions sent about twice as many
	// messages per second as 8, with a third of the p99 latency).
	Partitions int
	// MaxBatch is the most sends one partition allocates and commits together. It must not exceed
	// the event store's MaxBatch. Default 256.
	MaxBatch int
	// QueueSize is each partition's queue length; a caller blocks (bounded by its context) while
	// the queue is full. Default 4 × MaxBatch.
	QueueSize int
	// DoneLinger is how long a partition with nothing queued holds the done marks of the sends
	// it just committed, waiting for a next send to carry them in its allocation's round trip,
	// before it writes them alone. Callers are answered before their mark either way; an
	// identical send meanwhile waits for the mark (PendingPoll). Default 25 ms; negative: no wait.
	DoneLinger time.Duration
	// BatchTimeout bounds the Redis and PostgreSQL work of one batch; past it the batch's sends
	// fail with a retryable error. Default 10 s.
	BatchTimeout time.Duration
	// MaxAppendAttempts bounds how often a send whose seq was already taken in the event store is
	// given a new seq and written again. Default 5.
	MaxAppendAttempts int
	// PendingWait is how long a send waits for an identical send in progress (same sender, topic
	// and client_msg_id) before answering domain.ErrInProgress. Default 2 s.
	PendingWait time.Duration
	// PendingPoll is how often the waiting send re-reads the claim. Default 20 ms.
	PendingPoll time.Duration
	// Seq configures the Redis keys (KeyPrefix) and claim TTLs (pending 60 s, done 24 h, failed
	// 5 min by default).
	Seq seq.Config
}

func (c *SendMessageConfig) setDefaults() {
	if c.MaxContentBytes == 0 {
		c.MaxContentBytes = domain.DefaultMaxContentBytes
	}
	if c.Partitions == 0 {
		c.Partitions = max(2, runtime.GOMAXPROCS(0))
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 256
	}
	if c.QueueSize == 0 {
		c.QueueSize = 4 * c.MaxBatch
	}
	if c.DoneLinger == 0 {
		c.DoneLinger = 25 * time.Millisecond
	}
	if c.BatchTimeout == 0 {
		c.BatchTimeout = 10 * time.Second
	}
	if c.MaxAppendAttempts == 0 {
		c.MaxAppendAttempts = 5
	}
	if c.PendingWait == 0 {
		c.PendingWait = 2 * time.Second
	}
	if c.PendingPoll == 0 {
		c.PendingPoll = 20 * time.Millisecond
	}
}

// Validate reports every invalid field at once. Seq is validated by seq.New.
func (c SendMessageConfig) Validate() error {
	var errs []error
	positive := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", name, v))
		}
	}
	positive("MaxContentBytes", c.MaxContentBytes)
	positive("Partitions", c.Partitions)
	positive("MaxBatch", c.MaxBatch)
	positive("QueueSize", c.QueueSize)
	positive("MaxAppendAttempts", c.MaxAppendAttempts)
	if c.BatchTimeout <= 0 {
		errs = append(errs, fmt.Errorf("BatchTimeout must be positive, got %s", c.BatchTimeout))
	}
	if c.PendingPoll <= 0 || c.PendingWait < c.PendingPoll {
		errs = append(errs, errors.New("PendingPoll must be positive and not above PendingWait"))
	}
	return errors.Join(errs...)
}
