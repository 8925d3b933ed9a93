package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/imledger/imledger/domain"
)

// RebuildOptions says what to rebuild.
type RebuildOptions struct {
	// Projection is set by the rebuilder to the replay name of its read model; what a caller
	// sets is ignored.
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
