package relay

import (
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/imledger/imledger/transport/kafka"
)

// Config configures a Relay. The zero value is usable: New fills in the defaults.
type Config struct {
	// Name names the relay's checkpoint and, unless LockID is set, its advisory lock. Relays with
	// different names publish independently (each from its own checkpoint). Default "default".
	Name string

	// Kafka describes the topics the relay publishes to: TopicPrefix names them. When Brokers is
	// set, the relay also creates missing topics (kafka.EnsureTopics, with Partitions and
	// ReplicationFactor) each time it becomes active, before it publishes; without Brokers the
	// topics must exist. The producer itself is built by the caller.
	Kafka kafka.Config

	// BatchSize is the most events read and published per batch. The store's own read cap
	// (eventstore Config.MaxRead) also applies. Default 1000.
	BatchSize int

	// MinPoll and MaxPoll bound the pause after a read that found nothing new: it starts at
	// MinPoll and doubles up to MaxPoll, and resets when events are relayed. A NOTIFY from the
	// store ends the pause early. Defaults 5ms and 500ms.
	MinPoll time.Duration
	// MaxPoll: see MinPoll.
	MaxPoll time.Duration

	// LockID is the key of the session-level PostgreSQL advisory lock that elects the one active
	// relay. Default: a 64-bit FNV-1a hash of "imledger.relay:" + Name.
	LockID int64

	// LockRetry is how often a standby relay tries to take the lock. Default 1s.
	LockRetry time.Duration

	// LockCheck is how often the active relay pings the connection that holds the lock; a failed
	// ping means the lock may be gone, so the relay stops publishing and competes for it again.
	// Default 1s.
	LockCheck time.Duration

	// RetryMin and RetryMax bound the doubling pause between attempts after a failed read,
	// publish or checkpoint save. Defaults 100ms and 10s.
	RetryMin time.Duration
	// RetryMax: see RetryMin.
	RetryMax time.Duration

	// StopTimeout bounds how long Run keeps finishing the in-flight batch (publish and
	// checkpoint) after its context is cancelled. Default 30s.
	StopTimeout time.Duration
}

func (c *Config) setDefaults() {
	if c.Name == "" {
		c.Name = "default"
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1000
	}
	if c.MinPoll == 0 {
		c.MinPoll = 5 * time.Millisecond
	}
	if c.MaxPoll == 0 {
		c.MaxPoll = 500 * time.Millisecond
	}
	if c.LockID == 0 {
		c.LockID = DefaultLockID(c.Name)
	}
	if c.LockRetry == 0 {
		c.LockRetry = time.Second
	}
	if c.LockCheck == 0 {
		c.LockCheck = time.Second
	}
	if c.RetryMin == 0 {
		c.RetryMin = 100 * time.Millisecond
	}
	if c.RetryMax == 0 {
		c.RetryMax = 10 * time.Second
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = 30 * time.Second
	}
}

// Validate reports every problem of c, with defaults applied to unset fields, joined into one
// error.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if c.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("relay: batch size: %d, want >= 1", c.BatchSize))
	}
	if c.MinPoll <= 0 || c.MaxPoll < c.MinPoll {
		errs = append(errs, fmt.Errorf("relay: poll: want 0 < MinPoll (%s) <= MaxPoll (%s)", c.MinPoll, c.MaxPoll))
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		errs = append(errs, fmt.Errorf("relay: retry: want 0 < RetryMin (%s) <= RetryMax (%s)", c.RetryMin, c.RetryMax))
	}
	if c.LockRetry <= 0 || c.LockCheck <= 0 || c.StopTimeout <= 0 {
		errs = append(errs, errors.New("relay: LockRetry, LockCheck and StopTimeout must be positive"))
	}
	if len(c.Kafka.Brokers) > 0 {
		if err := c.Kafka.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("relay: %w", err))
		}
	}
	return errors.Join(errs...)
}

// DefaultLockID is the advisory lock key of the relay named name when Config.LockID is unset.
func DefaultLockID(name string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("imledger.relay:" + name))
	return int64(h.Sum64())
}

// backoff doubles a pause from min up to max.
type backoff struct{ cur, min, max time.Duration }

func newBackoff(min, max time.Duration) backoff { return backoff{cur: min, min: min, max: max} }

// next returns the pause to take now and doubles the following one.
func (b *backoff) next() time.Duration {
	d := b.cur
	b.cur = min(2*b.cur, b.max)
	return d
}

func (b *backoff) reset() { b.cur = b.min }
