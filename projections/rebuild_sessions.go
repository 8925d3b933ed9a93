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
	"github.com/imledger/imledger/readmodels/sessions"
)

// SessionsRebuildStore is what rebuilding sessions-mysql needs of readmodels/sessions.
type SessionsRebuildStore interface {
	SessionsStore
	Checksum(ctx context.Context, tenant domain.TenantID, tables sessions.Tables) (sessions.Summary, error)
}

// SessionsRebuildDeps are the collaborators of a SessionsRebuilder.
type SessionsRebuildDeps struct {
	Events  EventReader
	Tenants TenantDatabases
	Store   SessionsRebuildStore
	Logger  *slog.Logger
}

// SessionsRebuilder rebuilds and verifies the sessions-mysql read model from the event store.
type SessionsRebuilder struct {
	d   SessionsRebuildDeps
	log *slog.Logger
}

// NewSessionsRebuilder checks deps.
func NewSessionsRebuilder(d SessionsRebuildDeps) (*SessionsRebuilder, error) {
	if d.Events == nil || d.Tenants == nil || d.Store == nil {
		return nil, errors.New("projections: sessions rebuild: events, tenant databases and store are required")
	}
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &SessionsRebuilder{d: d, log: log.With("component", "rebuild")}, nil
}

// sessionsFilter selects t's session events.
func sessionsFilter(t domain.TenantID) domain.EventFilter {
	return domain.EventFilter{Tenant: t, EventTypes: acceptedTypes(isSessionEvent)}
}

// Rebuild rebuilds sessions-mysql for o.Tenant (or every tenant) as BusinessRebuilder.Rebuild
// does business-mysql: fresh tables filled from the store, an atomic swap, and the last o.CatchUpWindow positions applied again (the fold is
// order-independent and idempotent, so what the live projector wrote meanwhile is kept).
func (r *SessionsRebuilder) Rebuild(ctx context.Context, o RebuildOptions) (RebuildResult, error) {
	o.setDefaults()
	o.Projection = ProjectionSessionsMySQL
	return rebuildTenants(ctx, r.d.Tenants, o, r.log, r.rebuildTenant)
}

func (r *SessionsRebuilder) rebuildTenant(ctx context.Context, t domain.TenantID, o RebuildOptions) (TenantRebuild, error) {
	start := time.Now()
	db, err := r.d.Tenants.DB(ctx, t)
	if err != nil {
		return TenantRebuild{}, err
	}
	lock, err := lockTables(ctx, db, ProjectionSessionsMySQL, o.Suffix)
	if err != nil {
		return TenantRebuild{}, err
	}
	defer lock.release(context.WithoutCancel(ctx))
	live := sessions.DefaultTables()
	rebuilt := live.WithSuffix(o.Suffix)
	applied, last, events, err := r.fill(ctx, db, t, rebuilt, o.Progress, "rebuild "+t.String())
	if err != nil {
		return TenantRebuild{}, err
	}
	if err := sessions.SwapTables(ctx, db, live, rebuilt); err != nil {
		return TenantRebuild{}, err
	}
	caught, _, _, err := r.apply(ctx, t, live, max(0, last-o.CatchUpWindow), nil)
	if err != nil {
		return TenantRebuild{}, fmt.Errorf("catch up after swap: %w", err)
	}
	return TenantRebuild{Tenant: t, Events: events, Applied: applied + caught, Duration: time.Since(start)}, nil
}

// fill creates tables like the live ones (dropping leftovers first) and applies every session
// event of t to them.
func (r *SessionsRebuilder) fill(ctx context.Context, db *sql.DB, t domain.TenantID, tables sessions.Tables, progress Progress, label string) (applied, last, read int64, err error) {
	if err := sessions.DropTables(ctx, db, tables); err != nil {
		return 0, 0, 0, fmt.Errorf("drop leftover tables: %w", err)
	}
	if err := sessions.CreateTablesLike(ctx, db, sessions.DefaultTables(), tables); err != nil {
		return 0, 0, 0, err
	}
	total, err := r.d.Events.Count(ctx, sessionsFilter(t))
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

func (r *SessionsRebuilder) apply(ctx context.Context, t domain.TenantID, tables sessions.Tables, after int64, progress func(int)) (applied, last, read int64, err error) {
	last = after
	err = readPages(ctx, r.d.Events, sessionsFilter(t), after, businessPage, func(page []domain.Envelope) error {
		n, err := r.d.Store.ApplyBatch(ctx, t, GroupRebuildSessionsMySQL, tables, page)
		if err != nil {
			return err
		}
		applied += int64(n)
		read += int64(len(page))
		last = page[len(page)-1].Position
		if progress != nil {
			progress(len(page))
		}
		return nil
	})
	return applied, last, read, err
}

// SessionsVerifyResult is the outcome of SessionsRebuilder.Verify.
type SessionsVerifyResult struct {
	Tenant  domain.TenantID
	Events  int64
	Live    sessions.Summary
	Rebuilt sessions.Summary
}

// OK reports whether the live read model matched the rebuild.
func (v SessionsVerifyResult) OK() bool { return v.Live == v.Rebuilt }

// Verify rebuilds o.Tenant's sessions into a check table (suffix "_verify"), compares its row
// count and checksum with the live table, writes the outcome to o.Out and drops the check table.
// While another verification of the tenant's sessions runs the error wraps ErrTablesInUse.
// Events not yet projected show up as a difference.
func (r *SessionsRebuilder) Verify(ctx context.Context, o VerifyOptions) (SessionsVerifyResult, error) {
	if o.Tenant.IsZero() {
		return SessionsVerifyResult{}, errors.New("projections: verify: tenant is required")
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	db, err := r.d.Tenants.DB(ctx, o.Tenant)
	if err != nil {
		return SessionsVerifyResult{}, fmt.Errorf("projections: verify: %w", err)
	}
	lock, err := lockTables(ctx, db, ProjectionSessionsMySQL, verifySuffix)
	if err != nil {
		return SessionsVerifyResult{}, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	defer lock.release(context.WithoutCancel(ctx))
	check := sessions.DefaultTables().WithSuffix(verifySuffix)
	defer func() { _ = sessions.DropTables(context.WithoutCancel(ctx), db, check) }()
	_, _, events, err := r.fill(ctx, db, o.Tenant, check, o.Progress, "verify "+o.Tenant.String())
	if err != nil {
		return SessionsVerifyResult{}, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	res := SessionsVerifyResult{Tenant: o.Tenant, Events: events}
	if res.Live, err = r.d.Store.Checksum(ctx, o.Tenant, sessions.DefaultTables()); err != nil {
		return res, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	if res.Rebuilt, err = r.d.Store.Checksum(ctx, o.Tenant, check); err != nil {
		return res, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	if res.OK() {
		fmt.Fprintf(out, "tenant %s: %s matches a rebuild from %d events (%d sessions)\n", o.Tenant, ProjectionSessionsMySQL, events, res.Live.Rows)
		return res, nil
	}
	fmt.Fprintf(out, "tenant %s: %s differs from a rebuild from %d events\n  %s: live rows=%d checksum=%016x; rebuilt rows=%d checksum=%016x\n",
		o.Tenant, ProjectionSessionsMySQL, events, sessions.DefaultTables().Sessions, res.Live.Rows, res.Live.Checksum,
		res.Rebuilt.Rows, res.Rebuilt.Checksum)
	return res, nil
}
