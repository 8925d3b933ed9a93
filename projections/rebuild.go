package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// EventReader is the port rebuilds read the event log through, in position order; the
// composition root passes the event store (commands/eventstore.Store implements it).
type EventReader interface {
	ReadAll(ctx context.Context, f domain.EventFilter, afterPosition int64, limit int) ([]domain.Envelope, error)
	Count(ctx context.Context, f domain.EventFilter) (int64, error)
}

// TenantDatabases finds tenants' MySQL databases (readmodels/tenantdb.Router).
type TenantDatabases interface {
	DB(ctx context.Context, tenant domain.TenantID) (*sql.DB, error)
	Tenants(ctx context.Context) ([]domain.TenantID, error)
}

// RebuildStore is what a rebuild needs of readmodels/msgstore: StartBulkLoad fills the fresh
// tables, Apply catches the swapped-in tables up, Checksum compares copies.
type RebuildStore interface {
	MessageStore
	StartBulkLoad(ctx context.Context, tenant domain.TenantID, like, fresh msgstore.Tables) (*msgstore.BulkLoad, error)
	Checksum(ctx context.Context, tenant domain.TenantID, tables msgstore.Tables) (map[string]msgstore.TopicSummary, error)
}

// RebuildDeps are the collaborators of a Rebuilder. Hot is needed only to rebuild messages-hot.
type RebuildDeps struct {
	Events   EventReader
	Tenants  TenantDatabases
	Messages RebuildStore
	Hot      HotStore
	// Horizons, when set, makes rebuilds and verifications read each tenant's message events
	// under its retention horizon (expire), as the live projectors do.
	Horizons Horizons
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
	if d.Horizons != nil {
		d.Events = &expiringReader{EventReader: d.Events, horizons: d.Horizons}
	}
	return &Rebuilder{d: d, log: log.With("component", "rebuild")}, nil
}

// RebuildOptions says what to rebuild.
type RebuildOptions struct {
	// Projection is ProjectionMessagesMySQL or ProjectionMessagesHot.
	Projection string
	// Tenant limits the rebuild to one tenant; zero means every tenant with a database (and
	// ErrNoTenants when there is none).
	Tenant domain.TenantID
	// Progress is told how each tenant's pass over the event log advances; nil reports nothing.
	Progress Progress
	// BatchSize is how many events one write transaction holds (at least one page; pages are
	// read at up to this size, capped by the event store's Config.MaxRead, and gathered).
	// Larger transactions cost less per event. Default 5000.
	BatchSize int
	// Workers is how many write transactions run at once; each owns the conversations that
	// hash to it. Two let one writer decode its batch while the other's rows load. Default 2.
	Workers int
	// Suffix names the fresh tables of a MySQL rebuild. Default "_rebuild".
	Suffix string
	// CatchUpWindow is how many positions before the end of the first pass are read again after
	// the swap, so events that were committed late (position order is not commit order) or
	// appended during the rebuild reach the new tables; the events of the window that the first
	// pass loaded are skipped. Default 10000.
	CatchUpWindow int64
}

// The suffixes of the fresh tables of a MySQL rebuild and of a verification's check tables.
const (
	rebuildSuffix = "_rebuild"
	verifySuffix  = "_verify"
)

func (o *RebuildOptions) setDefaults() {
	if o.BatchSize <= 0 {
		o.BatchSize = 5000
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.Suffix == "" {
		o.Suffix = rebuildSuffix
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
// (leftovers of an interrupted rebuild are dropped first) and every message event of the tenant
// is bulk-loaded into them in position order (msgstore.BulkLoad: the secondary indexes added in
// one pass at the end), the tables are swapped in atomically (msgstore.SwapTables), and the last
// CatchUpWindow positions are applied again to the new live tables with the consumer group
// GroupRebuildMessagesMySQL. The live projector may keep running; what it wrote to the old
// tables is re-derived from the store by the catch-up, and what it writes again is idempotent.
//
// A MySQL rebuild holds a MySQL named lock on its fresh tables while it builds and swaps them,
// so a second rebuild of the same tenant's read model, in any process, fails with ErrTablesInUse
// instead of dropping the first one's tables (verifications use other tables and another lock).
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
	rebuild := r.messages().rebuildTenant
	if o.Projection == ProjectionMessagesHot {
		rebuild = r.rebuildHot
	}
	return rebuildTenants(ctx, r.d.Tenants, o, r.log, rebuild)
}

// messages returns the skeleton over the messages-mysql read model.
func (r *Rebuilder) messages() *TableRebuilder[msgstore.TopicSummary] {
	return &TableRebuilder[msgstore.TopicSummary]{model: messagesModel{r}, events: r.d.Events, tenants: r.d.Tenants, log: r.log}
}

// messagesModel is messages-mysql as the rebuild skeleton drives it: fresh tables are
// bulk-loaded (msgstore.BulkLoad, with o.Workers concurrent writers, the secondary indexes added
// in one pass at the end), and parts are conversations (msgstore.Checksum per topic).
type messagesModel struct{ r *Rebuilder }

var (
	_ ReadModel[msgstore.TopicSummary] = messagesModel{}
	_ bulkFiller                       = messagesModel{}
)

func (messagesModel) Projection() string { return ProjectionMessagesMySQL }

func (messagesModel) Filter(t domain.TenantID) domain.EventFilter { return MessageFilter(t) }

func (messagesModel) tables(suffix string) msgstore.Tables {
	return msgstore.DefaultTables().WithSuffix(suffix)
}

func (m messagesModel) CreateLike(ctx context.Context, db *sql.DB, suffix string) error {
	if err := msgstore.DropTables(ctx, db, m.tables(suffix)); err != nil {
		return fmt.Errorf("drop leftover tables: %w", err)
	}
	return msgstore.CreateTablesLike(ctx, db, msgstore.DefaultTables(), m.tables(suffix))
}

func (m messagesModel) Drop(ctx context.Context, db *sql.DB, suffix string) error {
	return msgstore.DropTables(ctx, db, m.tables(suffix))
}

func (m messagesModel) Swap(ctx context.Context, db *sql.DB, suffix string) error {
	return msgstore.SwapTables(ctx, db, msgstore.DefaultTables(), m.tables(suffix))
}

func (m messagesModel) Apply(ctx context.Context, t domain.TenantID, suffix string, events []domain.Envelope) (int, error) {
	return m.r.d.Messages.Apply(ctx, t, GroupRebuildMessagesMySQL, m.tables(suffix), events)
}

func (m messagesModel) Checksum(ctx context.Context, t domain.TenantID, suffix string) (map[string]msgstore.TopicSummary, error) {
	return m.r.d.Messages.Checksum(ctx, t, m.tables(suffix))
}

// fill bulk-loads every message event of t into fresh tables; the load is finished (its indexes
// added) only before a swap.
func (m messagesModel) fill(ctx context.Context, t domain.TenantID, suffix string, o RebuildOptions, bar ProgressTracker, seen *recentEvents) (filled, error) {
	bl, err := m.r.d.Messages.StartBulkLoad(ctx, t, msgstore.DefaultTables(), m.tables(suffix))
	if err != nil {
		return filled{}, err
	}
	applied, last, read, err := m.r.load(ctx, t, 0, o, bl.Apply, seen, bar)
	return filled{applied: applied, last: last, read: read, finish: bl.Finish}, err
}

// catchUp applies the message events after from that the load did not hold to the live tables
// with the consumer group GroupRebuildMessagesMySQL, with the load's concurrent writers.
func (m messagesModel) catchUp(ctx context.Context, t domain.TenantID, from int64, loaded map[uuid.UUID]bool, o RebuildOptions) (int64, error) {
	apply := func(ctx context.Context, events []domain.Envelope) (int, error) {
		missed := unseen(events, loaded)
		if len(missed) == 0 {
			return 0, nil
		}
		return m.r.d.Messages.Apply(ctx, t, GroupRebuildMessagesMySQL, msgstore.DefaultTables(), missed)
	}
	caught, _, _, err := m.r.load(ctx, t, from, o, apply, nil, nil)
	return caught, err
}

func (r *Rebuilder) rebuildHot(ctx context.Context, t domain.TenantID, o RebuildOptions) (TenantRebuild, error) {
	start := time.Now()
	total, err := r.d.Events.Count(ctx, MessageFilter(t))
	if err != nil {
		return TenantRebuild{}, fmt.Errorf("count events: %w", err)
	}
	bar := o.Progress.start("rebuild hot "+t.String(), total)
	var read int64
	err = readPages(ctx, r.d.Events, MessageFilter(t), 0, o.BatchSize, func(page []domain.Envelope) error {
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

// ErrNoTenants is the error of a rebuild of every tenant that finds no tenant database: a
// database template that names no database, or no tenant provisioned yet. Nothing was rebuilt.
var ErrNoTenants = errors.New("no tenant has a read-model database")

// rebuildTenants runs rebuild of o.Projection for o.Tenant, or for every tenant with a database
// when o.Tenant is zero, one tenant after another, and adds up the results. Finding no tenant
// database is ErrNoTenants, not an empty success.
func rebuildTenants(ctx context.Context, dbs TenantDatabases, o RebuildOptions, log *slog.Logger,
	rebuild func(context.Context, domain.TenantID, RebuildOptions) (TenantRebuild, error)) (RebuildResult, error) {
	tenants := []domain.TenantID{o.Tenant}
	if o.Tenant.IsZero() {
		var err error
		if tenants, err = dbs.Tenants(ctx); err != nil {
			return RebuildResult{}, fmt.Errorf("projections: rebuild: list tenants: %w", err)
		}
		if len(tenants) == 0 {
			return RebuildResult{}, fmt.Errorf("projections: rebuild %s: %w", o.Projection, ErrNoTenants)
		}
	}
	start := time.Now()
	var res RebuildResult
	for _, t := range tenants {
		tr, err := rebuild(ctx, t, o)
		if err != nil {
			return res, fmt.Errorf("projections: rebuild %s of tenant %s: %w", o.Projection, t, err)
		}
		res.Tenants = append(res.Tenants, tr)
		res.Events += tr.Events
		log.Info("tenant rebuilt", "projection", o.Projection, "tenant_id", t.String(), "events", tr.Events,
			"applied", tr.Applied, "duration", tr.Duration)
	}
	res.Duration = time.Since(start)
	return res, nil
}
