package replay

import (
	"context"
	"errors"
	"log/slog"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// GroupRebuildMessagesMySQL is the consumer group name under which a rebuild of messages-mysql
// applies the events of its catch-up after the swap. It never consumes Kafka. Never renamed (see projections.GroupMessagesMySQL).
const GroupRebuildMessagesMySQL = "imledger.rebuild.messages.mysql.v1"

// MessageRebuildStore is what rebuilding messages-mysql needs of readmodels/msgstore:
// StartBulkLoad fills the fresh tables, Apply catches the swapped-in tables up, Checksum compares
// copies.
type MessageRebuildStore interface {
	projections.MessageStore
	StartBulkLoad(ctx context.Context, tenant domain.TenantID, like, fresh msgstore.Tables) (*msgstore.BulkLoad, error)
	Checksum(ctx context.Context, tenant domain.TenantID, tables msgstore.Tables) (map[string]msgstore.TopicSummary, error)
}

// NewMessageRebuilder returns the rebuilder of messages-mysql: the Rebuilder over
// readmodels/msgstore, whose parts are conversations (msgstore.Checksum per topic). Per tenant,
// every message event is bulk-loaded into fresh tables in position order (msgstore.BulkLoad, with
// RebuildOptions.Workers concurrent writers and the secondary indexes added in one pass at the
// end), the tables are swapped in atomically (msgstore.SwapTables), and the last CatchUpWindow
// positions are applied again to the new live tables with the consumer group
// GroupRebuildMessagesMySQL. The live projector may keep running; what it wrote to the old tables
// is re-derived from the store by the catch-up, and what it writes again is idempotent. Pass
// events through ExpiringEvents to read them under each tenant's retention horizon, as the live
// projector does.
func NewMessageRebuilder(store MessageRebuildStore, events EventReader, tenants TenantDatabases, log *slog.Logger) (*Rebuilder[msgstore.TopicSummary], error) {
	if store == nil {
		return nil, errors.New("projections: rebuild: tenant databases and message store are required")
	}
	return NewRebuilder[msgstore.TopicSummary](messagesModel{tableSet: messageTables, store: store, events: events}, events, tenants, log)
}

// MessageFilter selects t's message events.
func MessageFilter(t domain.TenantID) domain.EventFilter {
	return filterOf(projections.MessagesMySQL(nil, ""), t)
}

// messageTables are the tables of messages-mysql.
var messageTables = tableSet[msgstore.Tables]{live: msgstore.DefaultTables(), createLike: msgstore.CreateTablesLike,
	swap: msgstore.SwapTables, drop: msgstore.DropTables}

// messagesModel is messages-mysql as the Rebuilder drives it: fresh tables are bulk-loaded
// (msgstore.BulkLoad, with o.Workers concurrent writers, the secondary indexes added in one pass at
// the end), and parts are conversations (msgstore.Checksum per topic).
type messagesModel struct {
	tableSet[msgstore.Tables]
	store  MessageRebuildStore
	events EventReader
}

var (
	_ Model[msgstore.TopicSummary] = messagesModel{}
	_ bulkFiller                   = messagesModel{}
)

func (messagesModel) Projection() string { return projections.ProjectionMessagesMySQL }

func (messagesModel) Filter(t domain.TenantID) domain.EventFilter { return MessageFilter(t) }

func (m messagesModel) Apply(ctx context.Context, t domain.TenantID, suffix string, events []domain.Envelope) (int, error) {
	return m.store.Apply(ctx, t, GroupRebuildMessagesMySQL, m.Tables(suffix), events)
}

func (m messagesModel) Checksum(ctx context.Context, t domain.TenantID, suffix string) (map[string]msgstore.TopicSummary, error) {
	return m.store.Checksum(ctx, t, m.Tables(suffix))
}

// fill bulk-loads every message event of t into fresh tables; the load is finished (its indexes
// added) only before a swap.
func (m messagesModel) fill(ctx context.Context, t domain.TenantID, suffix string, o RebuildOptions, bar ProgressTracker, seen *recentEvents) (filled, error) {
	bl, err := m.store.StartBulkLoad(ctx, t, m.live, m.Tables(suffix))
	if err != nil {
		return filled{}, err
	}
	applied, last, read, err := load(ctx, m.events, t, 0, o, bl.Apply, seen, bar)
	return filled{applied: applied, last: last, read: read, finish: bl.Finish}, err
}

// catchUp applies the message events after from that the load did not hold to the live tables
// with the consumer group GroupRebuildMessagesMySQL, with the load's concurrent writers.
func (m messagesModel) catchUp(ctx context.Context, t domain.TenantID, from int64, loaded map[uuid.UUID]bool, o RebuildOptions) (int64, error) {
	apply := func(ctx context.Context, events []domain.Envelope) (int, error) {
		missed := unseen(events, loaded)
		if len(missed) == 0 {
			return 0, nil
		}
		return m.store.Apply(ctx, t, GroupRebuildMessagesMySQL, m.live, missed)
	}
	caught, _, _, err := load(ctx, m.events, t, from, o, apply, nil, nil)
	return caught, err
}
