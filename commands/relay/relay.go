package relay

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/transport/kafka"
)

// Store is what the relay needs from the event store.
type Store interface {
	// ReadCommitted returns up to limit events after the cursor in (tx_id, position) order,
	// only from transactions older than every transaction still running, so an event that
	// commits late is never skipped.
	ReadCommitted(ctx context.Context, after eventstore.Cursor, limit int) ([]eventstore.Record, error)
	// LoadCheckpoint returns the saved cursor of the named relay, the zero cursor if none.
	LoadCheckpoint(ctx context.Context, name string) (eventstore.Cursor, error)
	// SaveCheckpoint stores the named relay's cursor.
	SaveCheckpoint(ctx context.Context, name string, c eventstore.Cursor) error
	// Notifications delivers a hint after events were appended, until ctx ends.
	Notifications(ctx context.Context) <-chan struct{}
}

// Relay publishes the event store's events to Kafka. Create it with New and run it with Run.
type Relay struct {
	store    Store
	producer sarama.SyncProducer
	pool     *pgxpool.Pool
	cfg      Config
	topics   kafka.Config
	log      *slog.Logger
	m        *metrics

	active  atomic.Bool
	events  atomic.Int64
	batches atomic.Int64
	pos     atomic.Int64
	txID    atomic.Uint64
}

// New builds a relay that reads from store, publishes with producer (configured with
// transport/kafka.NewProducerConfig or equivalent: acks from all replicas, successes returned)
// and elects itself with an advisory lock taken on a connection of pool. Its metrics are
// registered with reg unless reg is nil. It fails if cfg is invalid, a dependency is nil or the
// metrics are already registered.
func New(store Store, producer sarama.SyncProducer, pool *pgxpool.Pool, cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if store == nil || producer == nil || pool == nil || logger == nil {
		return nil, errors.New("relay: store, producer, pool and logger are required")
	}
	m, err := newMetrics(reg, cfg.Name)
	if err != nil {
		return nil, err
	}
	return &Relay{
		store: store, producer: producer, pool: pool, cfg: cfg,
		topics: cfg.Kafka,
		log:    logger.With("relay", cfg.Name), m: m,
	}, nil
}

// Stats is a snapshot of what this Relay value has published since it was built.
type Stats struct {
	Active  bool              // whether it holds the lock and publishes right now
	Events  int64             // events published and checkpointed
	Batches int64             // batches published and checkpointed
	Cursor  eventstore.Cursor // the last checkpoint saved
}

// Stats returns the relay's counters; safe to call while Run is running, e.g. to measure
// throughput.
func (r *Relay) Stats() Stats {
	return Stats{
		Active: r.active.Load(), Events: r.events.Load(), Batches: r.batches.Load(),
		Cursor: eventstore.Cursor{TxID: r.txID.Load(), Position: r.pos.Load()},
	}
}

// errLockLost ends a term as the active relay: the lock connection failed.
var errLockLost = errors.New("relay: advisory lock connection lost")

// errBlocked ends a term at an event this build cannot publish.
var errBlocked = errors.New("relay: stopped at an event this build cannot publish")

// errStopTimeout ends the in-flight batch when stopping takes longer than Config.StopTimeout.
var errStopTimeout = errors.New("relay: stop timeout")

// Run publishes events until ctx is cancelled, then finishes the in-flight batch (publish and
// checkpoint, bounded by Config.StopTimeout) and returns nil.
//
// It first waits for the relay's advisory lock, so only one process publishes per relay name.
// Having taken it, it creates missing topics (when Config.Kafka names brokers). While it holds
// the lock it reads committed events from the checkpoint, publishes them as one
// batch, waits for every ack and then saves the checkpoint; a crash between the acks and the save
// republishes that batch (at-least-once). Failed reads, publishes and saves are logged and retried
// with backoff without moving the checkpoint, so while Kafka is down nothing is lost and the relay
// catches up when it returns. If the lock connection fails, Run stops publishing, reloads the
// checkpoint and competes for the lock again.
//
// An event whose type this build does not know is not guessed onto some topic: putting a message
// event on the wrong topic would break its conversation's order for every consumer. The relay
// publishes everything before it, logs an error, sets the imledger_relay_blocked gauge, releases
// the lock so that another process (say, a newer build in a rolling deploy) can take over, and
// competes for the lock again after Config.RetryMax. The relay stays stopped at that event until
// a build that knows its type runs.
func (r *Relay) Run(ctx context.Context) error {
	for {
		lock, err := r.acquireLock(ctx)
		if err != nil {
			return nil // ctx cancelled while waiting: nothing in flight
		}
		r.m.leader.Set(1)
		r.active.Store(true)
		r.log.Info("relay is active", "lock_id", r.cfg.LockID)
		err = r.lead(ctx, lock)
		r.active.Store(false)
		r.m.leader.Set(0)
		lock.release(ctx)
		if ctx.Err() != nil {
			r.log.Info("relay stopped", "events", r.events.Load())
			return nil
		}
		if errors.Is(err, errBlocked) {
			r.log.Error("relay released its lock for another build to take over", "err", err, "retry_in", r.cfg.RetryMax)
			t := time.NewTimer(r.cfg.RetryMax)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			continue
		}
		r.log.Warn("relay lost leadership; competing for the lock again", "err", err)
	}
}

// lead publishes while this process holds the lock. It returns nil after a graceful stop and the
// cause otherwise (lock lost, stop timeout).
func (r *Relay) lead(ctx context.Context, lock *advisoryLock) error {
	// work outlives ctx so the in-flight batch can finish; it ends when the lock is lost,
	// StopTimeout after ctx ends, or when lead returns.
	work, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	go lock.watch(work, cancel, r.cfg.LockCheck)
	stopTimer := context.AfterFunc(ctx, func() {
		time.AfterFunc(r.cfg.StopTimeout, func() { cancel(errStopTimeout) })
	})
	defer stopTimer()

	t := &term{r: r, ctx: ctx, work: work}
	if stop, err := t.ensureTopics(); stop {
		return err
	}
	cursor, stop, err := t.loadCheckpoint()
	if stop {
		return err
	}
	t.notes = r.store.Notifications(work)
	return t.tail(cursor)
}
