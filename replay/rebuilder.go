package replay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
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

// Model is a read model kept in MySQL tables of each tenant's database, as a Rebuilder rebuilds
// and verifies it: reset a copy, apply batches of events to it, checksum it, and finish by
// swapping it in or dropping it. Its tables are named by the live names with a suffix appended
// ("" is the live tables, "_rebuild" a rebuild's fresh copies, "_verify" a verification's check
// copies). S summarises one part of the read model (a table, or a conversation) and is
// comparable: a live part and a rebuilt one hold the same rows when their summaries are equal.
type Model[S comparable] interface {
	// Projection is the read model's replay name (`imledger replay --projection`). It names the
	// runs' MySQL locks and their reports.
	Projection() string
	// Filter selects the events of tenant that the read model is built from.
	Filter(tenant domain.TenantID) domain.EventFilter
	// CreateLike creates the tables with suffix in db like the live ones, without rows, dropping
	// tables of those names left by an interrupted run first.
	CreateLike(ctx context.Context, db *sql.DB, suffix string) error
	// Drop drops the tables with suffix that exist.
	Drop(ctx context.Context, db *sql.DB, suffix string) error
	// Swap puts the tables with suffix in place of the live ones in one atomic rename, so readers
	// see either every old table or every new one, and drops the old ones.
	Swap(ctx context.Context, db *sql.DB, suffix string) error
	// Apply applies a page of tenant's events, in position order, to the tables with suffix and
	// returns how many were new to them. It must be idempotent (an event applied twice changes
	// nothing the second time): the catch-up after a swap and the live projector may apply the
	// same event.
	Apply(ctx context.Context, tenant domain.TenantID, suffix string, events []domain.Envelope) (int, error)
	// Checksum summarises the tables with suffix part by part; a part that one copy lacks
	// compares as the zero S.
	Checksum(ctx context.Context, tenant domain.TenantID, suffix string) (map[string]S, error)
}

// SwapHook is implemented by a Model with work to do once a rebuild's tables are live, such as
// dropping caches that mirror the old tables. A failure is logged, not returned: the tables are
// swapped in by then.
type SwapHook interface {
	AfterSwap(ctx context.Context, tenant domain.TenantID) error
}

// bulkFiller is a Model with a fill of its own: messages-mysql bulk-loads its fresh tables
// with concurrent writers and catches the swapped-in tables up the same way.
type bulkFiller interface {
	// fill creates the tables with suffix (dropping leftovers) and loads every event of t into
	// them, telling bar about each batch and adding what it read to seen (unless nil).
	fill(ctx context.Context, t domain.TenantID, suffix string, o RebuildOptions, bar ProgressTracker, seen *recentEvents) (filled, error)
	// catchUp applies the events after position from that loaded does not hold to the live tables.
	catchUp(ctx context.Context, t domain.TenantID, from int64, loaded map[uuid.UUID]bool, o RebuildOptions) (int64, error)
}

// filled is the outcome of filling fresh tables: the events applied, the last position read and
// the events read, and what has to be done before the tables are swapped in (nil: nothing).
type filled struct {
	applied, last, read int64
	finish              func(context.Context) error
}

// modelPage is how many events the default fill and catch-up read and apply at a time; the event
// store caps a read at its MaxRead (1000 by default).
const modelPage = 1000

// Rebuilder rebuilds and verifies one Model from the Postgres event store (not from Kafka, which
// may no longer hold old events), tenant by tenant. It is the one skeleton every MySQL read
// model's rebuild shares: a named lock per run, fresh tables filled from a filtered read of the
// log, an atomic swap, the last CatchUpWindow positions applied again, the model's post-swap hook,
// and a verification that rebuilds into check tables and compares them part by part with the
// live ones. It is safe for concurrent use; concurrent runs on one tenant's tables are refused
// (ErrTablesInUse).
type Rebuilder[S comparable] struct {
	model   Model[S]
	events  EventReader
	tenants TenantDatabases
	log     *slog.Logger
}

// NewRebuilder checks its arguments; log nil discards.
func NewRebuilder[S comparable](model Model[S], events EventReader, tenants TenantDatabases, log *slog.Logger) (*Rebuilder[S], error) {
	if model == nil || events == nil || tenants == nil {
		return nil, errors.New("projections: rebuild: a read model, an event reader and tenant databases are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Rebuilder[S]{model: model, events: events, tenants: tenants, log: log.With("component", "rebuild")}, nil
}

// Projection returns the replay name of the rebuilt read model.
func (r *Rebuilder[S]) Projection() string { return r.model.Projection() }

// Rebuild rebuilds the read model for o.Tenant, or every tenant with a database (ErrNoTenants when
// there is none), one tenant after another. Per tenant, under a MySQL named lock on its fresh
// tables (a second rebuild of them, in any process, fails with ErrTablesInUse): tables named with
// o.Suffix are created like the live ones and filled with every event of the model's filter in
// position order, swapped in atomically, and the last o.CatchUpWindow positions before the end of
// the fill are read again, the events the fill did not load (committed late, or appended during
// the rebuild) being applied to the new live tables; then the model's SwapHook runs. Running
// projectors may keep running: what they wrote to the old tables is in the log, hence in the new
// ones, and what they write again is idempotent. o.Projection is ignored.
func (r *Rebuilder[S]) Rebuild(ctx context.Context, o RebuildOptions) (RebuildResult, error) {
	o.setDefaults()
	o.Projection = r.model.Projection()
	return rebuildTenants(ctx, r.tenants, o, r.log, r.rebuildTenant)
}

func (r *Rebuilder[S]) rebuildTenant(ctx context.Context, t domain.TenantID, o RebuildOptions) (TenantRebuild, error) {
	start := time.Now()
	name := r.model.Projection()
	db, err := r.tenants.DB(ctx, t)
	if err != nil {
		return TenantRebuild{}, err
	}
	lock, err := lockTables(ctx, db, name, o.Suffix)
	if err != nil {
		return TenantRebuild{}, err
	}
	defer lock.release(context.WithoutCancel(ctx))
	seen := &recentEvents{window: o.CatchUpWindow}
	f, err := r.fill(ctx, db, t, o.Suffix, o, "rebuild "+t.String(), seen)
	if err != nil {
		return TenantRebuild{}, err
	}
	if f.finish != nil {
		if err := f.finish(ctx); err != nil {
			return TenantRebuild{}, err
		}
	}
	if err := r.model.Swap(ctx, db, o.Suffix); err != nil {
		return TenantRebuild{}, err
	}
	from := max(0, f.last-o.CatchUpWindow)
	caught, err := r.catchUp(ctx, t, from, seen.after(from), o)
	if err != nil {
		return TenantRebuild{}, fmt.Errorf("catch up after swap: %w", err)
	}
	if hook, ok := r.model.(SwapHook); ok {
		if err := hook.AfterSwap(ctx, t); err != nil {
			r.log.WarnContext(ctx, "the post-swap step failed; the tables are swapped in", "projection", name,
				"tenant_id", t.String(), "err", err)
		}
	}
	return TenantRebuild{Tenant: t, Events: f.read, Applied: f.applied + caught, Duration: time.Since(start)}, nil
}

// fill creates the tables with suffix in db, t's database, and fills them with every event of t
// the model is built from, with a progress bar labelled label. Events read are added to seen
// unless it is nil.
func (r *Rebuilder[S]) fill(ctx context.Context, db *sql.DB, t domain.TenantID, suffix string, o RebuildOptions, label string, seen *recentEvents) (filled, error) {
	bar, err := o.Progress.count(ctx, r.events, r.model.Filter(t), label)
	if err != nil {
		return filled{}, err
	}
	defer finish(bar)
	if b, ok := r.model.(bulkFiller); ok {
		return b.fill(ctx, t, suffix, o, bar, seen)
	}
	if err := r.model.CreateLike(ctx, db, suffix); err != nil {
		return filled{}, err
	}
	return pass(ctx, r.events, r.model.Filter(t), 0, modelPage, bar, seen, func(page []domain.Envelope) (int, error) {
		return r.model.Apply(ctx, t, suffix, page)
	})
}

// catchUp applies to the live tables the events of t after position from that loaded (the ids of
// the events the fill read there) does not hold.
func (r *Rebuilder[S]) catchUp(ctx context.Context, t domain.TenantID, from int64, loaded map[uuid.UUID]bool, o RebuildOptions) (int64, error) {
	if b, ok := r.model.(bulkFiller); ok {
		return b.catchUp(ctx, t, from, loaded, o)
	}
	f, err := pass(ctx, r.events, r.model.Filter(t), from, modelPage, nil, nil, func(page []domain.Envelope) (int, error) {
		missed := unseen(page, loaded)
		if len(missed) == 0 {
			return 0, nil
		}
		return r.model.Apply(ctx, t, "", missed)
	})
	return f.applied, err
}

// unseen returns the events of page whose ids loaded does not hold, in order.
func unseen(page []domain.Envelope, loaded map[uuid.UUID]bool) []domain.Envelope {
	missed := page[:0:0]
	for _, e := range page {
		if !loaded[e.EventID] {
			missed = append(missed, e)
		}
	}
	return missed
}
