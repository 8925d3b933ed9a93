package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/business"
)

// BusinessRebuildStore is what rebuilding business-mysql needs of readmodels/business.
type BusinessRebuildStore interface {
	BusinessStore
	Checksum(ctx context.Context, tenant domain.TenantID, tables business.Tables) (business.Summary, error)
	InvalidateTenant(ctx context.Context, tenant domain.TenantID) (int, error)
}

// BusinessRebuildDeps are the collaborators of a BusinessRebuilder.
type BusinessRebuildDeps struct {
	Events  EventReader
	Tenants TenantDatabases
	Store   BusinessRebuildStore
	Logger  *slog.Logger
}

// BusinessRebuilder rebuilds and verifies the business-mysql read model (groups, members,
// relations, users) from the Postgres event store.
type BusinessRebuilder struct {
	d   BusinessRebuildDeps
	log *slog.Logger
}

// NewBusinessRebuilder checks deps.
func NewBusinessRebuilder(d BusinessRebuildDeps) (*BusinessRebuilder, error) {
	if d.Events == nil || d.Tenants == nil || d.Store == nil {
		return nil, errors.New("projections: business rebuild: events, tenant databases and store are required")
	}
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &BusinessRebuilder{d: d, log: log.With("component", "rebuild")}, nil
}

// businessPage is how many events a rebuild reads and applies at a time; the event store caps a
// read at its MaxRead (1000 by default).
const businessPage = 1000

// Rebuild rebuilds business-mysql for o.Tenant (or every tenant): every business event is applied
// in position order to fresh tables (suffix o.Suffix), the tables are swapped in atomically, the last o.CatchUpWindow positions are
// applied again to the new live tables (version-guarded, so only what the live projector wrote
// to the old tables meanwhile changes anything), and the tenant's Redis caches are invalidated.
func (r *BusinessRebuilder) Rebuild(ctx context.Context, o RebuildOptions) (RebuildResult, error) {
	o.setDefaults()
	o.Projection = ProjectionBusinessMySQL
	return rebuildTenants(ctx, r.d.Tenants, o, r.log, r.rebuildTenant)
}

func (r *BusinessRebuilder) rebuildTenant(ctx context.Context, t domain.TenantID, o RebuildOptions) (TenantRebuild, error) {
	start := time.Now()
	db, err := r.d.Tenants.DB(ctx, t)
	if err != nil {
		return TenantRebuild{}, err
	}
	lock, err := lockTables(ctx, db, ProjectionBusinessMySQL, o.Suffix)
	if err != nil {
		return TenantRebuild{}, err
	}
	defer lock.release(context.WithoutCancel(ctx))
	live := business.DefaultTables()
	rebuilt := live.WithSuffix(o.Suffix)
	applied, last, events, err := r.fill(ctx, db, t, rebuilt, o.Progress, "rebuild "+t.String())
	if err != nil {
		return TenantRebuild{}, err
	}
	if err := business.SwapTables(ctx, db, live, rebuilt); err != nil {
		return TenantRebuild{}, err
	}
	caught, _, _, err := r.apply(ctx, t, live, max(0, last-o.CatchUpWindow), nil)
	if err != nil {
		return TenantRebuild{}, fmt.Errorf("catch up after swap: %w", err)
	}
	if _, err := r.d.Store.InvalidateTenant(ctx, t); err != nil {
		r.log.WarnContext(ctx, "caches not invalidated after the swap; they expire by their TTL", "projection", ProjectionBusinessMySQL,
			"tenant_id", t.String(), "err", err)
	}
	return TenantRebuild{Tenant: t, Events: events, Applied: applied + caught, Duration: time.Since(start)}, nil
}

// fill creates tables in db, t's database, like the live ones (dropping leftovers of an
// interrupted run first) and applies every business event of t to them.
func (r *BusinessRebuilder) fill(ctx context.Context, db *sql.DB, t domain.TenantID, tables business.Tables, progress Progress, label string) (applied, last, read int64, err error) {
	if err := business.DropTables(ctx, db, tables); err != nil {
		return 0, 0, 0, fmt.Errorf("drop leftover tables: %w", err)
	}
	if err := business.CreateTablesLike(ctx, db, business.DefaultTables(), tables); err != nil {
		return 0, 0, 0, err
	}
	total, err := r.d.Events.Count(ctx, businessFilter(t))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("count events: %w", err)
	}
	bar := progress.start(label, total)
	applied, last, read, err = r.apply(ctx, t, tables, 0, func(n int) {
		if bar != nil {
			_ = bar.Add(n)
		}
	})
	if bar != nil {
		_ = bar.Finish()
	}
	return applied, last, read, err
}

// businessFilter selects t's business events.
func businessFilter(t domain.TenantID) domain.EventFilter {
	return domain.EventFilter{Tenant: t, EventTypes: acceptedTypes(isBusinessEvent)}
}

// apply reads t's business events after position `after` and applies them to tables in order.
func (r *BusinessRebuilder) apply(ctx context.Context, t domain.TenantID, tables business.Tables, after int64, progress func(int)) (applied, last, read int64, err error) {
	last = after
	err = readPages(ctx, r.d.Events, businessFilter(t), after, businessPage, func(page []domain.Envelope) error {
		res, err := r.d.Store.ApplyBatch(ctx, t, GroupRebuildBusinessMySQL, tables, page)
		if err != nil {
			return err
		}
		applied += int64(res.Applied)
		read += int64(len(page))
		last = page[len(page)-1].Position
		if progress != nil {
			progress(len(page))
		}
		return nil
	})
	return applied, last, read, err
}

// BusinessTableDiff is a table whose live summary differs from a rebuild.
type BusinessTableDiff struct {
	Table   string
	Live    business.TableSummary
	Rebuilt business.TableSummary
}

func (d BusinessTableDiff) String() string {
	return fmt.Sprintf("%s: live rows=%d checksum=%016x; rebuilt rows=%d checksum=%016x",
		d.Table, d.Live.Rows, d.Live.Checksum, d.Rebuilt.Rows, d.Rebuilt.Checksum)
}

// BusinessVerifyResult is the outcome of BusinessRebuilder.Verify.
type BusinessVerifyResult struct {
	Tenant domain.TenantID
	Events int64
	Diffs  []BusinessTableDiff
}

// OK reports whether the live read model matched the rebuild.
func (v BusinessVerifyResult) OK() bool { return len(v.Diffs) == 0 }

// Verify rebuilds o.Tenant's business read model into check tables (suffix "_verify"), compares
// each table's row count and checksum with the live one, writes the differences to o.Out and
// drops the check tables. While another verification of the tenant's business tables runs the
// error wraps ErrTablesInUse. Events not yet projected show up as differences.
func (r *BusinessRebuilder) Verify(ctx context.Context, o VerifyOptions) (BusinessVerifyResult, error) {
	if o.Tenant.IsZero() {
		return BusinessVerifyResult{}, errors.New("projections: verify: tenant is required")
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	db, err := r.d.Tenants.DB(ctx, o.Tenant)
	if err != nil {
		return BusinessVerifyResult{}, fmt.Errorf("projections: verify: %w", err)
	}
	lock, err := lockTables(ctx, db, ProjectionBusinessMySQL, verifySuffix)
	if err != nil {
		return BusinessVerifyResult{}, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	defer lock.release(context.WithoutCancel(ctx))
	check := business.DefaultTables().WithSuffix(verifySuffix)
	defer func() { _ = business.DropTables(context.WithoutCancel(ctx), db, check) }()
	_, _, events, err := r.fill(ctx, db, o.Tenant, check, o.Progress, "verify "+o.Tenant.String())
	if err != nil {
		return BusinessVerifyResult{}, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	live, err := r.d.Store.Checksum(ctx, o.Tenant, business.DefaultTables())
	if err != nil {
		return BusinessVerifyResult{}, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	rebuilt, err := r.d.Store.Checksum(ctx, o.Tenant, check)
	if err != nil {
		return BusinessVerifyResult{}, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	res := BusinessVerifyResult{Tenant: o.Tenant, Events: events}
	names := business.DefaultTables()
	for _, p := range []struct {
		name       string
		live, buil business.TableSummary
	}{
		{names.Groups, live.Groups, rebuilt.Groups}, {names.Members, live.Members, rebuilt.Members},
		{names.Relations, live.Relations, rebuilt.Relations}, {names.Users, live.Users, rebuilt.Users},
	} {
		if p.live != p.buil {
			res.Diffs = append(res.Diffs, BusinessTableDiff{Table: p.name, Live: p.live, Rebuilt: p.buil})
		}
	}
	if res.OK() {
		fmt.Fprintf(out, "tenant %s: %s matches a rebuild from %d events\n", o.Tenant, ProjectionBusinessMySQL, events)
		return res, nil
	}
	fmt.Fprintf(out, "tenant %s: %d %s tables differ from a rebuild from %d events\n", o.Tenant, len(res.Diffs), ProjectionBusinessMySQL, events)
	for _, d := range res.Diffs {
		fmt.Fprintf(out, "  %s\n", d)
	}
	return res, nil
}
