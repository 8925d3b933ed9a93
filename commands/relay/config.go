package relay

import (
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/imledger/imledger/internal/kafka"
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

	// IdlePoll is the pause after a read that found nothing new when no append has signalled a
	// commit since the relay last read and the MinPoll-to-MaxPoll series that followed the last
	// signal is over: every append notifies at its commit and a dropped notification connection
	// wakes the relay when it reconnects, so an idle relay need not poll often. A commit held
	// back behind an older transaction (of any database of the cluster: transaction ids are the
	// cluster's) is looked for every MaxPoll after the series, until it shows or IdlePoll has
	// passed since its signal. While conversation seqs are missing (the gap sweeper waits for
	// their deadline) and without notifications, MaxPoll applies. Default 5s.
	IdlePoll time.Duration

	// Linger is how long the relay waits, after a pause that followed a read with nothing new,
	// before it reads again: the commits of that window go out in one Kafka transaction instead
	// of one each, which at a low, steady rate is much of the relay's, the broker's and the
	// consumers' work per event.
	// Realtime delivery does not wait for the relay; the read models lag by up to Linger more.
	// Negative: no wait. Default 80ms.
	Linger time.Duration

	// LockID is the key of the session-level PostgreSQL advisory lock that elects the one active
	// relay. Default: a 64-bit FNV-1a hash of "imledger.relay:" + Name.
	LockID int64

	// LockRetry is how often a standby relay tries to take the lock. Default 1s.
	LockRetry time.Duration

	// LockCheck is how often the active relay pings the connection that holds the lock; a failed
	// ping means the lock may be gone, so the relay stops publishing and competes for it again.
	// Default 1s.
	LockCheck time.Duration

	// LockTimeout bounds one ping of the lock connection. A relay cut off from PostgreSQL
	// therefore stops within LockCheck+LockTimeout, which Validate requires to be shorter than
	// the time the server takes to drop the dead session and free the lock (KeepaliveIdle +
	// KeepaliveInterval*KeepaliveCount, and UserTimeout): the old relay stops before a new one
	// can start. Default 2s.
	LockTimeout time.Duration

	// KeepaliveIdle, KeepaliveInterval and KeepaliveCount set TCP keepalives on the lock
	// connection, on the client socket and on the server's side of the session
	// (tcp_keepalives_idle/interval/count), so a holder that vanished is noticed in seconds
	// instead of the operating system's two hours. Defaults 5s, 2s and 3.
	KeepaliveIdle time.Duration
	// KeepaliveInterval: see KeepaliveIdle.
	KeepaliveInterval time.Duration
	// KeepaliveCount: see KeepaliveIdle.
	KeepaliveCount int

	// UserTimeout is TCP_USER_TIMEOUT on both ends of the lock connection (client socket and
	// server tcp_user_timeout, Linux): data left unacknowledged this long drops the connection.
	// Default 10s.
	UserTimeout time.Duration

	// TransactionalID is the Kafka transactional.id of the relay's producer. Every term opens a
	// new transactional producer with it and publishes each batch in one transaction; opening it
	// fences the producers of earlier terms (their open transaction is aborted and their later
	// sends fail), so a deposed relay cannot add records behind the new one. Consumers must read
	// with isolation level read_committed. Relays of different names need different ids.
	// Default Kafka.TopicPrefix + "imledger.relay." + Name.
	TransactionalID string

	// TransactionTimeout is how long the broker lets a relay's transaction stay open before it
	// aborts it (a relay that died mid-batch and was not replaced). Default 60s.
	TransactionTimeout time.Duration

	// PublishTimeout bounds one attempt to publish and commit a batch; an attempt that takes
	// longer is abandoned (its producer is replaced, which aborts the transaction) and the batch
	// is sent again after a pause. Default 30s.
	PublishTimeout time.Duration

	// GapDeadline is how long a seq of a conversation may stay missing after the relay published
	// a later seq of it before the relay gives the seq up with a seq-skip marker. It must exceed
	// the longest a send can take after allocating its seq (the sequencer's batch timeout, 10s by
	// default); a late send that loses to the marker is given a new seq, so a short deadline
	// costs seqs, never messages. Default 15s.
	GapDeadline time.Duration

	// GapStreams bounds how many conversations the gap sweeper tracks (least recently seen
	// first out); a conversation seen again is looked up in the store. Default 100000.
	GapStreams int

	// GapLookback is how many seqs below its first seq in a term the sweeper checks a
	// conversation for holes left before (a restart, a lost Redis counter). Default 1000.
	GapLookback int

	// GapMaxSkips caps the markers appended at once. Default 1000.
	GapMaxSkips int

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
	if c.IdlePoll == 0 {
		c.IdlePoll = 5 * time.Second
	}
	if c.Linger == 0 {
		c.Linger = 80 * time.Millisecond
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
	if c.LockTimeout == 0 {
		c.LockTimeout = 2 * time.Second
	}
	if c.KeepaliveIdle == 0 {
		c.KeepaliveIdle = 5 * time.Second
	}
	if c.KeepaliveInterval == 0 {
		c.KeepaliveInterval = 2 * time.Second
	}
	if c.KeepaliveCount == 0 {
		c.KeepaliveCount = 3
	}
	if c.UserTimeout == 0 {
		c.UserTimeout = 10 * time.Second
	}
	if c.TransactionalID == "" {
		c.TransactionalID = c.Kafka.TopicPrefix + "imledger.relay." + c.Name
	}
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = time.Minute
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = 30 * time.Second
	}
	if c.GapDeadline == 0 {
		c.GapDeadline = 15 * time.Second
	}
	if c.GapStreams == 0 {
		c.GapStreams = 100_000
	}
	if c.GapLookback == 0 {
		c.GapLookback = 1000
	}
	if c.GapMaxSkips == 0 {
		c.GapMaxSkips = 1000
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
	if c.IdlePoll < c.MaxPoll {
		errs = append(errs, fmt.Errorf("relay: idle poll %s: want at least MaxPoll (%s)", c.IdlePoll, c.MaxPoll))
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
	if c.LockTimeout <= 0 || c.KeepaliveIdle < time.Second || c.KeepaliveInterval < time.Second || c.KeepaliveCount < 1 || c.UserTimeout < time.Millisecond {
		errs = append(errs, errors.New("relay: LockTimeout must be positive, KeepaliveIdle and KeepaliveInterval at least 1s, KeepaliveCount and UserTimeout positive"))
	} else if client, server := c.ClientDetection(), c.ServerDetection(); client >= server {
		errs = append(errs, fmt.Errorf("relay: LockCheck+LockTimeout (%s) must be shorter than the server's detection of a dead lock holder (%s), so a cut-off relay stops before its lock is freed", client, server))
	}
	if c.TransactionTimeout < time.Second {
		errs = append(errs, fmt.Errorf("relay: transaction timeout: %s, want >= 1s", c.TransactionTimeout))
	}
	if c.PublishTimeout <= 0 {
		errs = append(errs, fmt.Errorf("relay: publish timeout: %s, want > 0", c.PublishTimeout))
	}
	if c.GapDeadline <= 0 || c.GapStreams < 1 || c.GapLookback < 1 || c.GapMaxSkips < 1 {
		errs = append(errs, errors.New("relay: GapDeadline, GapStreams, GapLookback and GapMaxSkips must be positive"))
	}
	if len(c.Kafka.Brokers) > 0 {
		if err := c.Kafka.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("relay: %w", err))
		}
	}
	return errors.Join(errs...)
}

// ClientDetection is the longest a relay cut off from PostgreSQL keeps publishing:
// LockCheck + LockTimeout.
func (c Config) ClientDetection() time.Duration {
	c.setDefaults()
	return c.LockCheck + c.LockTimeout
}

// ServerDetection is the soonest PostgreSQL drops the session of a lock holder that vanished
// from the network, freeing its lock: the keepalive probes' time or UserTimeout, whichever is
// shorter.
func (c Config) ServerDetection() time.Duration {
	c.setDefaults()
	return min(c.KeepaliveIdle+time.Duration(c.KeepaliveCount)*c.KeepaliveInterval, c.UserTimeout)
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

// spent reports whether the series has given its longest pause and would repeat it.
func (b *backoff) spent() bool { return b.cur == b.max }
