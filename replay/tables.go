package replay

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/filedb"
	"github.com/imledger/imledger/readmodels/login"
	"github.com/imledger/imledger/readmodels/pushdb"
	"github.com/imledger/imledger/readmodels/tokendb"
)

// tableSchema is a read model's tables as its readmodels package drives them: T names them, with
// a suffix for a rebuild's fresh copies, which it creates like the live ones, swaps in and drops.
// The Model of pushdb, tokendb and filedb is one; tableSet makes one of the functions of the
// other packages.
type tableSchema[T any] interface {
	Tables(suffix string) T
	CreateLike(ctx context.Context, db *sql.DB, suffix string) error
	Drop(ctx context.Context, db *sql.DB, suffix string) error
	Swap(ctx context.Context, db *sql.DB, suffix string) error
}

// tableSet is the tableSchema of a read-model package that names its tables with a Tables type
// and creates, swaps and drops them with functions of its own (msgstore, business, sessions,
// login).
type tableSet[T interface{ WithSuffix(s string) T }] struct {
	live       T
	createLike func(ctx context.Context, db *sql.DB, from, to T) error
	swap       func(ctx context.Context, db *sql.DB, live, rebuilt T) error
	drop       func(ctx context.Context, db *sql.DB, t T) error
}

var _ tableSchema[login.Tables] = tableSet[login.Tables]{}

// Tables returns the live tables with suffix appended to every name.
func (s tableSet[T]) Tables(suffix string) T { return s.live.WithSuffix(suffix) }

// CreateLike drops the tables with suffix left by an interrupted run, then creates them like the
// live ones, without rows.
func (s tableSet[T]) CreateLike(ctx context.Context, db *sql.DB, suffix string) error {
	if err := s.drop(ctx, db, s.Tables(suffix)); err != nil {
		return fmt.Errorf("drop leftover tables: %w", err)
	}
	return s.createLike(ctx, db, s.live, s.Tables(suffix))
}

// Drop drops the tables with suffix that exist.
func (s tableSet[T]) Drop(ctx context.Context, db *sql.DB, suffix string) error {
	return s.drop(ctx, db, s.Tables(suffix))
}

// Swap puts the tables with suffix in place of the live ones and drops the old ones.
func (s tableSet[T]) Swap(ctx context.Context, db *sql.DB, suffix string) error {
	return s.swap(ctx, db, s.live, s.Tables(suffix))
}

// tableStore is what a tableModel needs of its read model's store: the fold of events into tables
// T, and the summary S of tables T.
type tableStore[T, S any] interface {
	ApplyBatch(ctx context.Context, tenant domain.TenantID, tables T, events []domain.Envelope) (int, error)
	Checksum(ctx context.Context, tenant domain.TenantID, tables T) (S, error)
}

// tableModel is a read model kept in a fixed set of tables T of each tenant's database as the
// Rebuilder drives it, its parts being its tables: every read model but messages-mysql is one.
// Each says only what is its own: its live projection (which names it and selects its events),
// its tables, its store, and which summary is which live table's.
type tableModel[T, S any] struct {
	tableSchema[T]
	live  projections.Projection
	store tableStore[T, S]
	parts func(S) map[string]readmodels.TableSummary // by live table name
}

var _ Model[readmodels.TableSummary] = tableModel[login.Tables, map[string]readmodels.TableSummary]{}

// tableRebuilder returns the Rebuilder over m; what names the read model in the error of a
// missing store.
func tableRebuilder[T, S any](what string, m tableModel[T, S], events EventReader, tenants TenantDatabases, log *slog.Logger) (*Rebuilder[readmodels.TableSummary], error) {
	if m.store == nil {
		return nil, storeRequired(what)
	}
	return NewRebuilder[readmodels.TableSummary](m, events, tenants, log)
}

func (m tableModel[T, S]) Projection() string { return m.live.Name }

func (m tableModel[T, S]) Filter(t domain.TenantID) domain.EventFilter { return filterOf(m.live, t) }

func (m tableModel[T, S]) Apply(ctx context.Context, t domain.TenantID, suffix string, events []domain.Envelope) (int, error) {
	return m.store.ApplyBatch(ctx, t, m.Tables(suffix), events)
}

func (m tableModel[T, S]) Checksum(ctx context.Context, t domain.TenantID, suffix string) (map[string]readmodels.TableSummary, error) {
	sum, err := m.store.Checksum(ctx, t, m.Tables(suffix))
	if err != nil {
		return nil, err
	}
	return m.parts(sum), nil
}

// storeRequired is the error of a rebuilder asked for without its store.
func storeRequired(what string) error {
	return fmt.Errorf("projections: %s rebuild: a store is required", what)
}

// filterOf selects the events of tenant t that p accepts: a rebuild reads from the log the events
// the live projection builds its read model from, no more and no fewer.
func filterOf(p projections.Projection, t domain.TenantID) domain.EventFilter {
	var types []domain.EventType
	for _, info := range domain.EventTypes() {
		if p.Accept(info.Type) {
			types = append(types, info.Type)
		}
	}
	return domain.EventFilter{Tenant: t, EventTypes: types}
}

// NewPushRebuilder returns the rebuilder of push-settings: the Rebuilder over readmodels/pushdb.
// Rows older than the log (version 0) are carried over into the fresh tables.
func NewPushRebuilder(store projections.PushStore, events EventReader, tenants TenantDatabases, log *slog.Logger) (*Rebuilder[readmodels.TableSummary], error) {
	return tableRebuilder("push", tableModel[pushdb.Tables, pushdb.Summary]{tableSchema: pushdb.Model(),
		live: projections.PushSettings(store, ""), store: store, parts: pushParts}, events, tenants, log)
}

func pushParts(sum pushdb.Summary) map[string]readmodels.TableSummary {
	live := pushdb.DefaultTables()
	return map[string]readmodels.TableSummary{live.Devices: sum.Devices, live.Mutes: sum.Mutes}
}

// NewActionTokenRebuilder returns the rebuilder of action-tokens: the Rebuilder over
// readmodels/tokendb. Rows older than the log (version 0) are carried over into the fresh tables.
func NewActionTokenRebuilder(store projections.TokenStore, events EventReader, tenants TenantDatabases, log *slog.Logger) (*Rebuilder[readmodels.TableSummary], error) {
	return tableRebuilder("action token", tableModel[tokendb.Tables, readmodels.TableSummary]{tableSchema: tokendb.Model(),
		live: projections.ActionTokens(store, ""), store: store, parts: oneTable(tokendb.DefaultTables().Tokens)}, events, tenants, log)
}

// oneTable is the parts of a read model of one table, named table.
func oneTable(table string) func(readmodels.TableSummary) map[string]readmodels.TableSummary {
	return func(sum readmodels.TableSummary) map[string]readmodels.TableSummary {
		return map[string]readmodels.TableSummary{table: sum}
	}
}

// NewFileRebuilder returns the rebuilder of files-refs (im_files and im_group_files): the
// Rebuilder over readmodels/filedb. Its fill reads every sent message of the tenant besides the
// file events.
func NewFileRebuilder(store projections.FileStore, events EventReader, tenants TenantDatabases, log *slog.Logger) (*Rebuilder[readmodels.TableSummary], error) {
	return tableRebuilder("files", tableModel[filedb.Tables, filedb.Summary]{tableSchema: filedb.Model(),
		live: projections.FileRefsMySQL(store, ""), store: store, parts: fileParts}, events, tenants, log)
}

func fileParts(sum filedb.Summary) map[string]readmodels.TableSummary {
	live := filedb.DefaultTables()
	return map[string]readmodels.TableSummary{live.Files: sum.Files, live.Refs: sum.Refs}
}

// NewLoginSessionRebuilder returns the rebuilder of login-sessions: the Rebuilder over
// readmodels/login, whose parts are its two tables.
func NewLoginSessionRebuilder(store projections.LoginStore, events EventReader, tenants TenantDatabases, log *slog.Logger) (*Rebuilder[readmodels.TableSummary], error) {
	return tableRebuilder("login session", tableModel[login.Tables, map[string]readmodels.TableSummary]{
		tableSchema: tableSet[login.Tables]{live: login.DefaultTables(), createLike: login.CreateTablesLike,
			swap: login.SwapTables, drop: login.DropTables},
		live: projections.LoginSessions(store, ""), store: store, parts: func(sum map[string]readmodels.TableSummary) map[string]readmodels.TableSummary {
			return sum
		}}, events, tenants, log)
}
