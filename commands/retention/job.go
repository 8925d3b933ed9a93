package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/domain"
)

// MonthKeys destroys a tenant's data keys of the months before month ("2006-01", the first month
// the tenant keeps): crypto-shredding's share of retention. It must be idempotent.
type MonthKeys interface {
	DestroyBefore(ctx context.Context, tenant, month string) error
}

// ReadModel removes a tenant's message history sent in [from, until) (from zero: no lower
// bound) and returns how many messages it removed; it must be idempotent.
type ReadModel interface {
	ExpireBefore(ctx context.Context, tenant domain.TenantID, from, until time.Time) (int64, error)
}

// Tenants is what the job needs of the tenant registry; *tenant.Registry implements it.
type Tenants interface {
	List(ctx context.Context) ([]tenant.Info, error)
	ApplyRetention(ctx context.Context, t domain.TenantID, horizon time.Time, meta tenant.Meta) (tenant.Result, error)
}

// Partitions is what the job needs of the event store; *eventstore.Store implements it.
type Partitions interface {
	EnsureMonths(ctx context.Context, from, through time.Time) (int, error)
	MonthPartitions(ctx context.Context) ([]eventstore.MonthPartition, error)
	DropMonth(ctx context.Context, p eventstore.MonthPartition, lockWait time.Duration) error
}

var (
	_ Tenants    = (*tenant.Registry)(nil)
	_ Partitions = (*eventstore.Store)(nil)
)

// Deps are the collaborators of a Job.
type Deps struct {
	Tenants    Tenants              // required
	Partitions Partitions           // required
	ReadModels map[string]ReadModel // by name, e.g. "mysql", "redis"
	Keys       MonthKeys            // nil: no month keys are kept
	Logger     *slog.Logger         // default: discard
	Now        func() time.Time     // default time.Now
}

// Job is the retention job. Run may be called from several processes at once: every step is
// idempotent and the event store serialises what must be.
type Job struct {
	cfg Config
	d   Deps
	log *slog.Logger
	now func() time.Time
}

// New checks cfg and deps and returns a Job.
func New(cfg Config, d Deps) (*Job, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Tenants == nil || d.Partitions == nil {
		return nil, errors.New("retention: Tenants and Partitions are required")
	}
	j := &Job{cfg: cfg, d: d, log: d.Logger, now: d.Now}
	if j.log == nil {
		j.log = slog.New(slog.DiscardHandler)
	}
	if j.now == nil {
		j.now = time.Now
	}
	return j, nil
}

// TenantReport is what one run did for one tenant.
type TenantReport struct {
	Tenant  domain.TenantID
	From    time.Time        // the horizon recorded before (zero: none)
	Horizon time.Time        // the horizon recorded now
	Removed map[string]int64 // messages removed, by read model
}

// Report is what one run did.
type Report struct {
	Tenants  []TenantReport
	Created  int      // month partitions made ahead
	Dropped  []string // month partitions dropped
	Kept     []string // why expired-looking months were kept
	Duration time.Duration
}

// Run does one pass: month partitions are made ahead, each tenant whose horizon moved has its
// history removed (read models, then month keys) and the horizon recorded, and month partitions
// every tenant has passed and the relay published are dropped. A tenant that fails is reported
// in the error and the others go on; a failed tenant is done again by the next run.
func (j *Job) Run(ctx context.Context) (Report, error) {
	start := j.now()
	var rep Report
	var errs []error
	created, err := j.d.Partitions.EnsureMonths(ctx, start, domain.MonthStart(start).AddDate(0, j.cfg.MonthsAhead, 0))
	rep.Created = created
	if err != nil {
		errs = append(errs, fmt.Errorf("retention: make partitions ahead: %w", err))
	}
	infos, err := j.d.Tenants.List(ctx)
	if err != nil {
		return rep, fmt.Errorf("retention: list tenants: %w", err)
	}
	for _, info := range infos {
		horizon, ok := info.Settings.RetentionHorizon(start)
		if !ok || !horizon.After(info.RetainedBefore) {
			continue
		}
		tr, err := j.applyTenant(ctx, info, horizon)
		if err != nil {
			errs = append(errs, fmt.Errorf("retention: tenant %s: %w", info.Tenant, err))
			continue
		}
		rep.Tenants = append(rep.Tenants, tr)
	}
	dropped, kept, err := j.dropMonths(ctx)
	rep.Dropped, rep.Kept = dropped, kept
	if err != nil {
		errs = append(errs, err)
	}
	rep.Duration = j.now().Sub(start)
	return rep, errors.Join(errs...)
}

// applyTenant removes info's history before horizon and records the horizon.
func (j *Job) applyTenant(ctx context.Context, info tenant.Info, horizon time.Time) (TenantReport, error) {
	tr := TenantReport{Tenant: info.Tenant, From: info.RetainedBefore, Horizon: horizon, Removed: map[string]int64{}}
	for name, rm := range j.d.ReadModels {
		n, err := rm.ExpireBefore(ctx, info.Tenant, info.RetainedBefore, horizon)
		tr.Removed[name] = n
		if err != nil {
			return tr, fmt.Errorf("expire %s: %w", name, err)
		}
	}
	if j.d.Keys != nil {
		if err := j.d.Keys.DestroyBefore(ctx, info.Tenant.String(), horizon.Format("2006-01")); err != nil {
			return tr, fmt.Errorf("destroy month keys: %w", err)
		}
	}
	meta := tenant.Meta{Actor: domain.Actor{Type: domain.ActorSystem, ID: "retention"}}
	if _, err := j.d.Tenants.ApplyRetention(ctx, info.Tenant, horizon, meta); err != nil {
		return tr, fmt.Errorf("record horizon: %w", err)
	}
	j.log.InfoContext(ctx, "retention applied", slog.String("tenant_id", info.Tenant.String()),
		slog.Time("horizon", horizon), slog.Any("removed", tr.Removed))
	return tr, nil
}

// dropMonths tries to drop every month partition that ended before the current month; a month a
// tenant or the relay still holds is reported as kept.
func (j *Job) dropMonths(ctx context.Context) (dropped, kept []string, err error) {
	parts, err := j.d.Partitions.MonthPartitions(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("retention: list partitions: %w", err)
	}
	current := domain.MonthStart(j.now())
	for _, p := range parts {
		if p.End().After(current) {
			break
		}
		err := j.d.Partitions.DropMonth(ctx, p, j.cfg.LockWait)
		switch {
		case err == nil:
			dropped = append(dropped, p.Name)
			j.log.InfoContext(ctx, "month partition dropped", slog.String("partition", p.Name))
		case errors.Is(err, eventstore.ErrPartitionKept):
			kept = append(kept, err.Error())
		default:
			return dropped, kept, fmt.Errorf("retention: %w", err)
		}
	}
	return dropped, kept, nil
}

// Serve runs the job every Interval until ctx ends, the first time at once; a failed run is
// logged and the next one tries again.
func (j *Job) Serve(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		rep, err := j.Run(ctx)
		if err != nil && ctx.Err() == nil {
			j.log.WarnContext(ctx, "retention run", slog.Any("error", err))
		}
		if len(rep.Tenants) > 0 || len(rep.Dropped) > 0 || rep.Created > 0 {
			j.log.InfoContext(ctx, "retention run done", slog.Int("tenants", len(rep.Tenants)),
				slog.Int("partitions_created", rep.Created), slog.Any("partitions_dropped", rep.Dropped))
		}
		t.Reset(j.cfg.Interval)
	}
}
