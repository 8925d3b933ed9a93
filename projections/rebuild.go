package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// EventReader reads the event store in position order (commands/eventstore.Store).
type EventReader interface {
	ReadAll(ctx context.Context, f eventstore.Filter, afterPosition int64, limit int) ([]domain.Envelope, error)
	Count(ctx context.Context, f eventstore.Filter) (int64, error)
}

// TenantDatabases finds tenants' MySQL databases (readmodels/tenantdb.Router).
type TenantDatabases interface {
	DB(ctx context.Context, tenant domain.TenantID) (*sql.DB, error)
	Tenants(ctx context.Context) ([]domain.TenantID, error)
}

// RebuildStore is what a rebuild needs of readmodels/msgstore.
type RebuildStore interface {
	MessageStore
	Checksum(ctx context.Context, tenant domain.TenantID, tables msgstore.Tables) (map[string]msgstore.TopicSummary, error)
}

// RebuildDeps are the collaborators of a Rebuilder. Hot is needed only to rebuild messages-hot.
type RebuildDeps struct {
	Events   EventReader
	Tenants  TenantDatabases
	Messages RebuildStore
	Hot      HotStore
	Logger   *slog.Logger
}

// Rebuilder rebuilds read models from the Postgres event store (not from Kafka, which may no
// longer hold old events).
type Rebuilder struct {
	d   RebuildDeps
	log *slog.Logger
}

// NewRebuilder checks deps and returns a Rebuilder.
func NewRebuilder(d RebuildDeps) (*Rebuilder, error) {
	var errs []error
	if d.Events == nil {
		errs = append(errs, errors.New("projections: rebuild: event reader is required"))
	}
	if d.Tenants == nil || d.Messages == nil {
		errs = append(errs, errors.New("projections: rebuild: tenant databases and message store are required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Rebuilder{d: d, log: log.With("component", "rebuild")}, nil
}

// RebuildOptions says what to rebuild.
type RebuildOptions struct {
	// Projection is ProjectionMessagesMySQL or ProjectionMessagesHot.
	Projection string
	// Tenant limits the rebuild to one tenant; zero means every tenant with a database.
	Tenant domain.TenantID
	// Progress receives a progress bar (events, events/s) per tenant; nil shows none.
	Progress io.Writer
	// BatchSize is how many events are read per page and written per Apply. Default 1000 (the
	// event store's default read cap).
	BatchSize int
	// Workers is how many Apply calls run at once; each owns the conversations that hash to it.
	// Default 4.
	Workers int
	// Suffix names the fresh tables of a MySQL rebuild. Default "_rebuild".
	Suffix string
	// CatchUpWindow is how many positions before the end of the first pass are read again after
	// the swap, so events that were committed late (position order is not commit order) or
	// appended during the rebuild reach the new tables. Default 10000.
	CatchUpWindow int64
}

func (o *RebuildOptions) setDefaults() {
	if o.BatchSize <= 0 {
		o.BatchSize = 1000
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Suffix == "" {
		o.Suffix = "_rebuild"
	}
	if o.CatchUpWindow <= 0 {
		o.CatchUpWindow = 10_000
	}
}

// TenantRebuild is the outcome of one tenant's rebuild.
type TenantRebuild struct {
	Tenant   domain.TenantID
	Events   int64 // events read from the store
	Applied  int64 // events new to the rebuilt read model
	Duration time.Duration
}

// RebuildResult is the outcome of a rebuild.
type RebuildResult struct {
	Tenants  []TenantRebuild
	Events   int64
	Duration time.Duration
}

// PerSecond is the rebuild's throughput in events read per second.
func (r RebuildResult) PerSecond() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Events) / r.Duration.Seconds()
}

// Rebuild rebuilds a projection's read model from the event store.
//
// messages-mysql, per tenant: fresh tables named with Suffix are created like the live ones
// (leftovers of an interrupted rebuild are dropped first), every message event of the tenant is
// applied to them in position order with the consumer group GroupRebuildMessagesMySQL, the live
// projector's processed-event rows are copied over (so it keeps deduplicating redeliveries), the
// tables are swapped in atomically (msgstore.SwapTables), and the last CatchUpWindow positions
// are read again into the new live tables. The live projector may keep running; what it wrote to
// the old tables is re-derived from the store by the catch-up.
//
// messages-hot: every message event of the tenant is applied to Redis again in position order;
// the hot store is idempotent, so this repairs missing or stale keys and changes nothing else.
func (r *Rebuilder) Rebuild(ctx context.Context, o RebuildOptions) (RebuildResult, error) {
	o.setDefaults()
	if o.Projection != ProjectionMessagesMySQL && o.Projection != ProjectionMessagesHot {
		return RebuildResult{}, fmt.Errorf("projections: rebuild: unknown projection %q (want %s or %s)",
			o.Projection, ProjectionMessagesMySQL, ProjectionMessagesHot)
	}
	if o.Projection == ProjectionMessagesHot && r.d.Hot == nil {
		return RebuildResult{}, errors.New("projections: rebuild: messages-hot needs a hot store")
	}
	tenants := []domain.TenantID{o.Tenant}
	if o.Tenant.IsZero() {
		var err error
		if tenants, err = r.d.Tenants.Tenants(ctx); err != nil {
			return RebuildResult{}, fmt.Errorf("projections: rebuild: list tenants: %w", err)
		}
	}
	start := time.Now()
	var res RebuildResult
	for _, t := range tenants {
		var tr TenantRebuild
		var err error
		if o.Projection == ProjectionMessagesMySQL {
			tr, err = r.rebuildMySQL(ctx, t, o)
		} else {
			tr, err = r.rebuildHot(ctx, t, o)
		}
		if err != nil {
			return res, fmt.Errorf("projections: rebuild %s of tenant %s: %w", o.Projection, t, err)
		}
		res.Tenants = append(res.Tenants, tr)
		res.Events += tr.Events
		r.log.Info("tenant rebuilt", "projection", o.Projection, "tenant_id", t.String(), "events", tr.Events,
			"applied", tr.Applied, "duration", tr.Duration)
	}
	res.Duration = time.Since(start)
	return res, nil
}

func (r *Rebuilder) rebuildMySQL(ctx context.Context, t domain.TenantID, o RebuildOptions) (TenantRebuild, error) {
	start := time.Now()
	db, err := r.d.Tenants.DB(ctx, t)
	if err != nil {
		return TenantRebuild{}, err
	}
	live := msgstore.DefaultTables()
	rebuilt := live.WithSuffix(o.Suffix)
	applied, last, events, err := r.fillTables(ctx, db, t, rebuilt, o, "rebuild "+t.String())
	if err != nil {
		return TenantRebuild{}, err
	}
	copySQL := "INSERT IGNORE INTO `" + rebuilt.Processed + "` (consumer_group, event_id, processed_at)" +
		" SELECT consumer_group, event_id, processed_at FROM `" + live.Processed + "` WHERE consumer_group <> ?"
	if _, err := db.ExecContext(ctx, copySQL, GroupRebuildMessagesMySQL); err != nil {
		return TenantRebuild{}, fmt.Errorf("copy processed events: %w", err)
	}
	if err := msgstore.SwapTables(ctx, db, live, rebuilt); err != nil {
		return TenantRebuild{}, err
	}
	caught, _, _, err := r.applyStore(ctx, t, live, max(0, last-o.CatchUpWindow), o.BatchSize, o.Workers, nil)
	if err != nil {
		return TenantRebuild{}, fmt.Errorf("catch up after swap: %w", err)
	}
	return TenantRebuild{Tenant: t, Events: events, Applied: applied + caught, Duration: time.Since(start)}, nil
}

// fillTables creates fresh tables and applies every message event of t to them. It returns the
// events applied, the last position read and the events read.
func (r *Rebuilder) fillTables(ctx context.Context, db *sql.DB, t domain.TenantID, tables msgstore.Tables, o RebuildOptions, label string) (applied, last, read int64, err error) {
	if err := msgstore.DropTables(ctx, db, tables); err != nil {
		return 0, 0, 0, fmt.Errorf("drop leftover tables: %w", err)
	}
	if err := msgstore.CreateTablesLike(ctx, db, msgstore.DefaultTables(), tables); err != nil {
		return 0, 0, 0, err
	}
	filter := eventstore.Filter{Tenant: t, EventTypes: messageEventTypes()}
	total, err := r.d.Events.Count(ctx, filter)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("count events: %w", err)
	}
	bar := newBar(o.Progress, total, label)
	applied, last, read, err = r.applyStore(ctx, t, tables, 0, o.BatchSize, o.Workers, bar)
	if bar != nil {
		_ = bar.Finish()
	}
	return applied, last, read, err
}

// applyStore reads t's message events after position from the store and applies them to
// tables: the next page is read while the current one is written, and a page is split by
// conversation over workers concurrent Apply calls, so each conversation's events stay in order.
func (r *Rebuilder) applyStore(ctx context.Context, t domain.TenantID, tables msgstore.Tables, after int64, batch, workers int, bar *progressbar.ProgressBar) (applied, last, read int64, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	shards := make([]chan []domain.Envelope, workers)
	for i := range shards {
		shards[i] = make(chan []domain.Envelope, 2)
		wg.Add(1)
		go func(in <-chan []domain.Envelope) {
			defer wg.Done()
			for events := range in {
				if ctx.Err() != nil {
					continue
				}
				n, err := r.d.Messages.Apply(ctx, t, GroupRebuildMessagesMySQL, tables, events)
				if err != nil {
					cancel(err)
					continue
				}
				mu.Lock()
				applied += int64(n)
				mu.Unlock()
				if bar != nil {
					_ = bar.Add(len(events))
				}
			}
		}(shards[i])
	}
	last = after
	readErr := r.readPages(ctx, t, after, batch, func(page []domain.Envelope) error {
		for i, part := range splitByConversation(page, workers) {
			if len(part) == 0 {
				continue
			}
			select {
			case shards[i] <- part:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		read += int64(len(page))
		last = page[len(page)-1].Position
		return nil
	})
	for _, c := range shards {
		close(c)
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return applied, last, read, err
	}
	return applied, last, read, readErr
}

// splitByConversation splits events into n parts by a hash of their conversation key, keeping
// the order within each part.
func splitByConversation(events []domain.Envelope, n int) [][]domain.Envelope {
	if n == 1 {
		return [][]domain.Envelope{events}
	}
	parts := make([][]domain.Envelope, n)
	for _, e := range events {
		h := fnv.New32a()
		_, _ = h.Write([]byte(domain.ConversationKey(e.StreamID)))
		i := int(h.Sum32() % uint32(n))
		parts[i] = append(parts[i], e)
	}
	return parts
}

func (r *Rebuilder) rebuildHot(ctx context.Context, t domain.TenantID, o RebuildOptions) (TenantRebuild, error) {
	start := time.Now()
	filter := eventstore.Filter{Tenant: t, EventTypes: messageEventTypes()}
	total, err := r.d.Events.Count(ctx, filter)
	if err != nil {
		return TenantRebuild{}, fmt.Errorf("count events: %w", err)
	}
	bar := newBar(o.Progress, total, "rebuild hot "+t.String())
	var read int64
	err = r.readPages(ctx, t, 0, o.BatchSize, func(page []domain.Envelope) error {
		if _, err := r.d.Hot.ApplyBatch(ctx, t, page); err != nil {
			return err
		}
		read += int64(len(page))
		if bar != nil {
			_ = bar.Add(len(page))
		}
		return nil
	})
	if bar != nil {
		_ = bar.Finish()
	}
	return TenantRebuild{Tenant: t, Events: read, Applied: read, Duration: time.Since(start)}, err
}

// readPages reads t's message events after position in pages and hands each page to apply, in
// order. One page is read ahead while the previous one is applied.
func (r *Rebuilder) readPages(ctx context.Context, t domain.TenantID, after int64, batch int, apply func([]domain.Envelope) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	filter := eventstore.Filter{Tenant: t, EventTypes: messageEventTypes()}
	pages := make(chan []domain.Envelope, 2)
	readErr := make(chan error, 1)
	go func() {
		defer close(pages)
		pos := after
		for {
			page, err := r.d.Events.ReadAll(ctx, filter, pos, batch)
			if err != nil {
				readErr <- fmt.Errorf("read events after position %d: %w", pos, err)
				return
			}
			if len(page) == 0 {
				return
			}
			pos = page[len(page)-1].Position
			select {
			case pages <- page:
			case <-ctx.Done():
				return
			}
		}
	}()
	for page := range pages {
		if err := apply(page); err != nil {
			return err
		}
	}
	select {
	case err := <-readErr:
		return err
	default:
		return ctx.Err()
	}
}

// newBar returns a progress bar writing to w, or nil when w is nil.
func newBar(w io.Writer, total int64, label string) *progressbar.ProgressBar {
	if w == nil {
		return nil
	}
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(label),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("events"),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionOnCompletion(func() { _, _ = fmt.Fprintln(w) }),
	)
}
