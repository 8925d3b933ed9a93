package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

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

// SessionsRebuilder rebuilds and verifies the sessions-mysql read model from the event store: the
// TableRebuilder skeleton over readmodels/sessions.
type SessionsRebuilder struct {
	tr *TableRebuilder[sessions.Summary]
}

// NewSessionsRebuilder checks deps.
func NewSessionsRebuilder(d SessionsRebuildDeps) (*SessionsRebuilder, error) {
	if d.Events == nil || d.Tenants == nil || d.Store == nil {
		return nil, errors.New("projections: sessions rebuild: events, tenant databases and store are required")
	}
	tr, err := NewTableRebuilder[sessions.Summary](sessionsModel{d.Store}, d.Events, d.Tenants, d.Logger)
	if err != nil {
		return nil, err
	}
	return &SessionsRebuilder{tr: tr}, nil
}

// sessionsFilter selects t's session events.
func sessionsFilter(t domain.TenantID) domain.EventFilter {
	return domain.EventFilter{Tenant: t, EventTypes: acceptedTypes(isSessionEvent)}
}

// Rebuild rebuilds sessions-mysql for o.Tenant (or every tenant) as TableRebuilder.Rebuild does:
// fresh tables filled from the store, an atomic swap, and the events of the last o.CatchUpWindow
// positions that the fill did not load applied again (the fold is order-independent and
// idempotent, so what the live projector writes meanwhile is kept).
func (r *SessionsRebuilder) Rebuild(ctx context.Context, o RebuildOptions) (RebuildResult, error) {
	return r.tr.Rebuild(ctx, o)
}

// sessionsModel is sessions-mysql as the rebuild skeleton drives it; its one part is im_sessions.
type sessionsModel struct{ store SessionsRebuildStore }

var _ ReadModel[sessions.Summary] = sessionsModel{}

func (sessionsModel) Projection() string { return ProjectionSessionsMySQL }

func (sessionsModel) Filter(t domain.TenantID) domain.EventFilter { return sessionsFilter(t) }

func (sessionsModel) tables(suffix string) sessions.Tables {
	return sessions.DefaultTables().WithSuffix(suffix)
}

func (m sessionsModel) CreateLike(ctx context.Context, db *sql.DB, suffix string) error {
	if err := sessions.DropTables(ctx, db, m.tables(suffix)); err != nil {
		return fmt.Errorf("drop leftover tables: %w", err)
	}
	return sessions.CreateTablesLike(ctx, db, sessions.DefaultTables(), m.tables(suffix))
}

func (m sessionsModel) Drop(ctx context.Context, db *sql.DB, suffix string) error {
	return sessions.DropTables(ctx, db, m.tables(suffix))
}

func (m sessionsModel) Swap(ctx context.Context, db *sql.DB, suffix string) error {
	return sessions.SwapTables(ctx, db, sessions.DefaultTables(), m.tables(suffix))
}

func (m sessionsModel) Apply(ctx context.Context, t domain.TenantID, suffix string, events []domain.Envelope) (int, error) {
	return m.store.ApplyBatch(ctx, t, GroupRebuildSessionsMySQL, m.tables(suffix), events)
}

func (m sessionsModel) Checksum(ctx context.Context, t domain.TenantID, suffix string) (map[string]sessions.Summary, error) {
	sum, err := m.store.Checksum(ctx, t, m.tables(suffix))
	if err != nil {
		return nil, err
	}
	return map[string]sessions.Summary{sessions.DefaultTables().Sessions: sum}, nil
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
// count and checksum with the live table, writes the outcome to o.Out and drops the check table
// (TableRebuilder.Verify). While another verification of the tenant's sessions runs the error
// wraps ErrTablesInUse. Events not yet projected show up as a difference.
func (r *SessionsRebuilder) Verify(ctx context.Context, o VerifyOptions) (SessionsVerifyResult, error) {
	mr, err := r.tr.Verify(ctx, o)
	if err != nil {
		return SessionsVerifyResult{}, err
	}
	if o.Out != nil {
		mr.Report(o.Out, ProjectionSessionsMySQL)
	}
	table := sessions.DefaultTables().Sessions
	return SessionsVerifyResult{Tenant: mr.Tenant, Events: mr.Events, Live: mr.Live[table], Rebuilt: mr.Rebuilt[table]}, nil
}
