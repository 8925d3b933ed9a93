package replay

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/business"
)

// GroupRebuildBusinessMySQL is the consumer group name under which a rebuild of business-mysql
// applies events. It never consumes Kafka. Never renamed (see projections.GroupMessagesMySQL).
const GroupRebuildBusinessMySQL = "imledger.rebuild.business.mysql.v1"

// BusinessRebuildStore is what rebuilding business-mysql needs of readmodels/business.
type BusinessRebuildStore interface {
	projections.BusinessStore
	Checksum(ctx context.Context, tenant domain.TenantID, tables business.Tables) (business.Summary, error)
	InvalidateTenant(ctx context.Context, tenant domain.TenantID) (int, error)
}

// NewBusinessRebuilder returns the rebuilder of business-mysql (groups, members, relations,
// users): the Rebuilder over readmodels/business, whose parts are its tables. A rebuild applies
// every business event in position order to fresh tables, swaps them in atomically, applies the
// events of the last CatchUpWindow positions that the fill did not load to the new live tables
// (version-guarded), and invalidates the tenant's Redis caches.
func NewBusinessRebuilder(store BusinessRebuildStore, events EventReader, tenants TenantDatabases, log *slog.Logger) (*Rebuilder[readmodels.TableSummary], error) {
	if store == nil {
		return nil, storeRequired("business")
	}
	return NewRebuilder[readmodels.TableSummary](businessModel{tableModel: tableModel[business.Tables, business.Summary]{
		tableSchema: tableSet[business.Tables]{live: business.DefaultTables(), createLike: business.CreateTablesLike,
			swap: business.SwapTables, drop: business.DropTables},
		live: projections.BusinessMySQL(store, "", nil, nil), store: businessStore{store}, parts: businessParts}, store: store},
		events, tenants, log)
}

func businessParts(sum business.Summary) map[string]readmodels.TableSummary {
	live := business.DefaultTables()
	return map[string]readmodels.TableSummary{live.Groups: sum.Groups, live.Members: sum.Members,
		live.Relations: sum.Relations, live.Users: sum.Users}
}

// businessStore is the store of business-mysql as a rebuild folds into it: under the consumer
// group GroupRebuildBusinessMySQL.
type businessStore struct{ BusinessRebuildStore }

func (s businessStore) ApplyBatch(ctx context.Context, t domain.TenantID, tables business.Tables, events []domain.Envelope) (int, error) {
	res, err := s.BusinessRebuildStore.ApplyBatch(ctx, t, GroupRebuildBusinessMySQL, tables, events)
	return res.Applied, err
}

// businessModel is business-mysql as the Rebuilder drives it, with the drop of its caches once a
// rebuild's tables are live.
type businessModel struct {
	tableModel[business.Tables, business.Summary]
	store BusinessRebuildStore
}

var _ SwapHook = businessModel{}

// AfterSwap invalidates the tenant's Redis caches, which still mirror the old tables; a failure
// leaves them to expire by their TTL.
func (m businessModel) AfterSwap(ctx context.Context, t domain.TenantID) error {
	_, err := m.store.InvalidateTenant(ctx, t)
	if err != nil {
		return fmt.Errorf("caches not invalidated (they expire by their TTL): %w", err)
	}
	return nil
}
