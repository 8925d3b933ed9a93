package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

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
// relations, users) from the Postgres event store: the TableRebuilder skeleton over
// readmodels/business.
type BusinessRebuilder struct {
	tr *TableRebuilder[business.TableSummary]
}

// NewBusinessRebuilder checks deps.
func NewBusinessRebuilder(d BusinessRebuildDeps) (*BusinessRebuilder, error) {
	if d.Events == nil || d.Tenants == nil || d.Store == nil {
		return nil, errors.New("projections: business rebuild: events, tenant databases and store are required")
	}
	tr, err := NewTableRebuilder[business.TableSummary](businessModel{d.Store}, d.Events, d.Tenants, d.Logger)
	if err != nil {
		return nil, err
	}
	return &BusinessRebuilder{tr: tr}, nil
}

// Rebuild rebuilds business-mysql for o.Tenant (or every tenant) as TableRebuilder.Rebuild does:
// every business event is applied in position order to fresh tables (suffix o.Suffix), the tables
// are swapped in atomically, the events of the last o.CatchUpWindow positions that the fill did
// not load are applied to the new live tables (version-guarded), and the tenant's Redis caches
// are invalidated.
func (r *BusinessRebuilder) Rebuild(ctx context.Context, o RebuildOptions) (RebuildResult, error) {
	return r.tr.Rebuild(ctx, o)
}

// businessFilter selects t's business events.
func businessFilter(t domain.TenantID) domain.EventFilter {
	return domain.EventFilter{Tenant: t, EventTypes: acceptedTypes(isBusinessEvent)}
}

// businessModel is business-mysql as the rebuild skeleton drives it; its parts are its tables.
type businessModel struct{ store BusinessRebuildStore }

var (
	_ ReadModel[business.TableSummary] = businessModel{}
	_ SwapHook                         = businessModel{}
)

func (businessModel) Projection() string { return ProjectionBusinessMySQL }

func (businessModel) Filter(t domain.TenantID) domain.EventFilter { return businessFilter(t) }

func (businessModel) tables(suffix string) business.Tables {
	return business.DefaultTables().WithSuffix(suffix)
}

func (m businessModel) CreateLike(ctx context.Context, db *sql.DB, suffix string) error {
	if err := business.DropTables(ctx, db, m.tables(suffix)); err != nil {
		return fmt.Errorf("drop leftover tables: %w", err)
	}
	return business.CreateTablesLike(ctx, db, business.DefaultTables(), m.tables(suffix))
}

func (m businessModel) Drop(ctx context.Context, db *sql.DB, suffix string) error {
	return business.DropTables(ctx, db, m.tables(suffix))
}

func (m businessModel) Swap(ctx context.Context, db *sql.DB, suffix string) error {
	return business.SwapTables(ctx, db, business.DefaultTables(), m.tables(suffix))
}

func (m businessModel) Apply(ctx context.Context, t domain.TenantID, suffix string, events []domain.Envelope) (int, error) {
	res, err := m.store.ApplyBatch(ctx, t, GroupRebuildBusinessMySQL, m.tables(suffix), events)
	return res.Applied, err
}

func (m businessModel) Checksum(ctx context.Context, t domain.TenantID, suffix string) (map[string]business.TableSummary, error) {
	tables := m.tables(suffix)
	sum, err := m.store.Checksum(ctx, t, tables)
	if err != nil {
		return nil, err
	}
	live := business.DefaultTables()
	return map[string]business.TableSummary{live.Groups: sum.Groups, live.Members: sum.Members,
		live.Relations: sum.Relations, live.Users: sum.Users}, nil
}

// AfterSwap invalidates the tenant's Redis caches, which still mirror the old tables; a failure
// leaves them to expire by their TTL.
func (m businessModel) AfterSwap(ctx context.Context, t domain.TenantID) error {
	_, err := m.store.InvalidateTenant(ctx, t)
	if err != nil {
		return fmt.Errorf("caches not invalidated (they expire by their TTL): %w", err)
	}
	return nil
}

// BusinessTableDiff is a table whose live summary differs from a rebuild.
type BusinessTableDiff struct {
	Table   string
	Live    business.TableSummary
	Rebuilt business.TableSummary
}

func (d BusinessTableDiff) String() string {
	return fmt.Sprintf("%s: live %s; rebuilt %s", d.Table, d.Live, d.Rebuilt)
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
// each table's row count and checksum with the live one, writes the outcome to o.Out and drops
// the check tables (TableRebuilder.Verify). While another verification of the tenant's business
// tables runs the error wraps ErrTablesInUse. Events not yet projected show up as differences.
func (r *BusinessRebuilder) Verify(ctx context.Context, o VerifyOptions) (BusinessVerifyResult, error) {
	mr, err := r.tr.Verify(ctx, o)
	if err != nil {
		return BusinessVerifyResult{}, err
	}
	if o.Out != nil {
		mr.Report(o.Out, ProjectionBusinessMySQL)
	}
	res := BusinessVerifyResult{Tenant: mr.Tenant, Events: mr.Events}
	for _, d := range mr.Diffs {
		res.Diffs = append(res.Diffs, BusinessTableDiff{Table: d.Part, Live: d.Live, Rebuilt: d.Rebuilt})
	}
	return res, nil
}
