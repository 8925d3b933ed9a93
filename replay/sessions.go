package replay

import (
	"context"
	"log/slog"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/sessions"
)

// GroupRebuildSessionsMySQL is the consumer group a rebuild of sessions-mysql records in the
// rebuilt tables. It never consumes Kafka. Never renamed (see projections.GroupMessagesMySQL).
const GroupRebuildSessionsMySQL = "imledger.rebuild.sessions.mysql.v1"

// SessionsRebuildStore is what rebuilding sessions-mysql needs of readmodels/sessions.
type SessionsRebuildStore interface {
	projections.SessionsStore
	Checksum(ctx context.Context, tenant domain.TenantID, tables sessions.Tables) (sessions.Summary, error)
}

// NewSessionsRebuilder returns the rebuilder of sessions-mysql: the Rebuilder over
// readmodels/sessions, whose one part is im_sessions. A rebuild fills fresh tables from the store,
// swaps them in atomically, and applies again the events of the last CatchUpWindow positions that
// the fill did not load (the fold is order-independent and idempotent, so what the live projector
// writes meanwhile is kept).
func NewSessionsRebuilder(store SessionsRebuildStore, events EventReader, tenants TenantDatabases, log *slog.Logger) (*Rebuilder[readmodels.TableSummary], error) {
	if store == nil {
		return nil, storeRequired("sessions")
	}
	return NewRebuilder[readmodels.TableSummary](tableModel[sessions.Tables, sessions.Summary]{
		tableSchema: tableSet[sessions.Tables]{live: sessions.DefaultTables(), createLike: sessions.CreateTablesLike,
			swap: sessions.SwapTables, drop: sessions.DropTables},
		live: projections.SessionsMySQL(store, ""), store: sessionsStore{store}, parts: oneTable(sessions.DefaultTables().Sessions)},
		events, tenants, log)
}

// sessionsStore is the store of sessions-mysql as a rebuild folds into it: under the consumer
// group GroupRebuildSessionsMySQL.
type sessionsStore struct{ SessionsRebuildStore }

func (s sessionsStore) ApplyBatch(ctx context.Context, t domain.TenantID, tables sessions.Tables, events []domain.Envelope) (int, error) {
	return s.SessionsRebuildStore.ApplyBatch(ctx, t, GroupRebuildSessionsMySQL, tables, events)
}
