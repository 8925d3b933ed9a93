package relay

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/kafka"
)

// Store is what the relay needs from the event store (commands/eventstore.Store).
type Store interface {
	// ReadCommitted returns up to limit events after the cursor in (tx_id, position) order,
	// only from transactions older than every transaction still running, so an event that
	// commits late is never skipped.
	ReadCommitted(ctx context.Context, after eventstore.Cursor, limit int) ([]eventstore.Record, error)
	// BeginRelayTerm starts a new term of the named relay, fencing the earlier ones, and
	// returns its checkpoint, republish progress, cluster id and acknowledged offsets.
	BeginRelayTerm(ctx context.Context, name string) (eventstore.RelayTerm, error)
	// SaveRelayProgress moves the checkpoint forward (or records a republish's progress) and
	// raises the acknowledged offsets, failing with eventstore.ErrStaleTerm once the term is over.
	SaveRelayProgress(ctx context.Context, name string, term int64, c eventstore.Cursor, offsets []eventstore.PartitionOffset) error
	// StartRepublish records the cluster id and, with fromStart, starts republishing from the
	// first event; eventstore.ErrStaleTerm once the term is over.
	StartRepublish(ctx context.Context, name string, term int64, clusterID string, fromStart bool) error
	// AppendSkipsFenced appends seq-skip markers while term is current and returns those stored.
	AppendSkipsFenced(ctx context.Context, relay string, term int64, skips []eventstore.Skip) ([]domain.Envelope, error)
	// MissingVersions finds the missing versions below each probe, looking back window versions.
	MissingVersions(ctx context.Context, probes []eventstore.StreamProbe, window int64) ([][]eventstore.VersionRange, error)
	// HistoricHoles calls found for every run of seqs missing in a conversation's history.
	HistoricHoles(ctx context.Context, found func(eventstore.StreamHole) error) error
	// MarkHolesSwept records that the history's holes were given up, while term is current.
	MarkHolesSwept(ctx context.Context, name string, term int64) error
	// Notifications delivers a hint after events were appended, until ctx ends.
	Notifications(ctx context.Context) <-chan struct{}
}

var _ Store = (*eventstore.Store)(nil)

// Relay publishes the event store's events to Kafka. Create it with New and run it with Run.
type Relay struct {
	store  Store
	pool   *pgxpool.Pool
	cfg    Config
	topics kafka.Config
	log    *slog.Logger
	m      *metrics

	active  atomic.Bool
	term    atomic.Int64
	events  atomic.Int64
	batches atomic.Int64
	reads   atomic.Int64
	skips   atomic.Int64
	pos     atomic.Int64
	txID    atomic.Uint64
}

// New builds a relay that reads from store and publishes to the cluster of cfg.Kafka (which must
// name brokers) with a transactional producer it opens each term, and that elects itself with an
// advisory lock taken on a connection made with pool's settings. Its metrics are registered with
// reg unless reg is nil. It fails if cfg is invalid, a dependency is nil or the metrics are
// already registered.
func New(store Store, pool *pgxpool.Pool, cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if store == nil || pool == nil || logger == nil {
		return nil, errors.New("relay: store, pool and logger are required")
	}
	if len(cfg.Kafka.Brokers) == 0 {
		return nil, errors.New("relay: Kafka brokers are required")
	}
	m, err := newMetrics(reg, cfg.Name)
	if err != nil {
		return nil, err
	}
	return &Relay{
		store: store, pool: pool, cfg: cfg,
		topics: cfg.Kafka,
		log:    logger.With("relay", cfg.Name), m: m,
	}, nil
}

// Stats is a snapshot of what this Relay value has published since it was built.
type Stats struct {
	Active  bool              // whether it holds the lock and publishes right now
	Term    int64             // the term it leads or last led, 0 before its first
	Events  int64             // events published and checkpointed
	Batches int64             // batches published and checkpointed
	Skips   int64             // seq-skip markers it appended
	Reads   int64             // reads of the committed tail, empty ones included
	Cursor  eventstore.Cursor // the last checkpoint saved
}

// Stats returns the relay's counters; safe to call while Run is running, e.g. to measure
// throughput.
func (r *Relay) Stats() Stats {
	return Stats{
		Active: r.active.Load(), Term: r.term.Load(), Events: r.events.Load(), Batches: r.batches.Load(), Skips: r.skips.Load(),
		Reads:  r.reads.Load(),
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
// It first waits for the relay's advisory lock, so normally only one process publishes per relay
// name. Having taken it, it starts a term: it increments the term in PostgreSQL (from then on a
// relay of an earlier term can neither move the checkpoint nor append markers), creates missing
// topics, and opens a transactional producer (which fences the producer of every earlier term in
// Kafka: a deposed relay's batch in flight is aborted and its later sends fail). It then asks the
// cluster what it holds: if the cluster id changed, or a partition ends before a record the
// broker had acknowledged (an embedded broker that lost its log), it republishes every event from
// the start; consumers dedupe by event_id.
//
// While it leads it reads committed events from the checkpoint, publishes them as one Kafka
// transaction, and then saves the checkpoint with the acknowledged offsets, guarded by its term;
// a crash between the commit and the save republishes that batch (at-least-once). Failed reads,
// publishes and saves are logged and retried with backoff without moving the checkpoint, so while
// Kafka is down nothing is lost and the relay catches up when it returns. After each batch the
// gap sweeper appends seq-skip markers for conversation seqs missing past Config.GapDeadline. If
// the lock connection fails, a ping takes longer than Config.LockTimeout, the term is fenced or
// the producer fails, Run stops publishing and competes for the lock again.
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
		if errors.Is(err, errFenced) || errors.Is(err, eventstore.ErrStaleTerm) {
			r.log.Warn("relay was deposed by a newer term; competing for the lock again", "err", err)
			continue
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
	go lock.watch(work, cancel, r.cfg.LockCheck, r.cfg.LockTimeout)
	stopTimer := context.AfterFunc(ctx, func() {
		time.AfterFunc(r.cfg.StopTimeout, func() { cancel(errStopTimeout) })
	})
	defer stopTimer()

	t := &term{r: r, ctx: ctx, work: work, sweep: newSweeper(r.cfg)}
	defer t.closeProducer()
	cursor, stop, err := t.begin()
	if stop {
		return err
	}
	t.notes = r.store.Notifications(work)
	return t.tail(cursor)
}
