package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/pushdb"
)

// The push-settings projection: the devices users registered for offline reminders and the
// conversations they muted.
const (
	// ProjectionPushSettings is the replay name of the push-settings projection.
	ProjectionPushSettings = "push-settings"
	// GroupPushSettings is its consumer group. Never renamed (see GroupMessagesMySQL).
	GroupPushSettings = "imledger.proj.push-settings.mysql.v1"
)

// PushStore is what the push-settings projection and its rebuild need of readmodels/pushdb.
type PushStore interface {
	ApplyBatch(ctx context.Context, tenant domain.TenantID, tables pushdb.Tables, events []domain.Envelope) (int, error)
	Checksum(ctx context.Context, tenant domain.TenantID, tables pushdb.Tables) (pushdb.Summary, error)
}

// isPushEvent reports whether t is a push settings event.
func isPushEvent(t domain.EventType) bool {
	switch t {
	case domain.EventPushDeviceRegistered, domain.EventPushDeviceRemoved, domain.EventPushConversationMuted,
		domain.EventPushConversationUnmuted:
		return true
	}
	return false
}

// PushSettings is the push-settings projection: the push events of im.business.event go to the
// tenant's im_push_devices and im_push_mutes, version-guarded (pushdb.Store.ApplyBatch), which the
// push worker reads. group "" means GroupPushSettings. Unknown tenants are dead-lettered as for
// MessagesMySQL.
func PushSettings(store PushStore, group string) Projection {
	if group == "" {
		group = GroupPushSettings
	}
	return Projection{
		Name:          ProjectionPushSettings,
		ConsumerGroup: group,
		Topics:        []string{tkafka.TopicBusinessEvent},
		Accept:        isPushEvent,
		Applier: ApplierFunc(func(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
			n, err := store.ApplyBatch(ctx, tenant, pushdb.DefaultTables(), events)
			return n, readModelErr(err)
		}),
	}
}

// readModelErr classifies an error of a read model's apply as businessErr does: an event that can
// never be applied is permanent, an unprovisioned tenant is ErrUnknownTenant, transient failures
// pass through.
func readModelErr(err error) error {
	if err == nil || errors.Is(err, domain.ErrRetryable) {
		return err
	}
	var ee *readmodels.EventError
	if errors.As(err, &ee) && errors.Is(err, domain.ErrInvalid) {
		return permanent(ReasonBadEvent, err)
	}
	if errors.Is(err, domain.ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrUnknownTenant, err)
	}
	return err
}

// NewPushRebuilder returns the rebuilder of push-settings: the TableRebuilder skeleton over
// readmodels/pushdb. Rows older than the log (version 0) are carried over into the fresh tables.
func NewPushRebuilder(store PushStore, events EventReader, tenants TenantDatabases, log *slog.Logger) (*TableRebuilder[readmodels.TableSummary], error) {
	if store == nil {
		return nil, errors.New("projections: push rebuild: a store is required")
	}
	return NewTableRebuilder[readmodels.TableSummary](pushModel{store}, events, tenants, log)
}

// pushModel is push-settings as the rebuild skeleton drives it; its parts are its tables.
type pushModel struct{ store PushStore }

var _ ReadModel[readmodels.TableSummary] = pushModel{}

func (pushModel) Projection() string { return ProjectionPushSettings }

func (pushModel) Filter(t domain.TenantID) domain.EventFilter {
	return domain.EventFilter{Tenant: t, EventTypes: acceptedTypes(isPushEvent)}
}

func (pushModel) tables(suffix string) pushdb.Tables {
	return pushdb.DefaultTables().WithSuffix(suffix)
}

func (m pushModel) CreateLike(ctx context.Context, db *sql.DB, suffix string) error {
	if err := pushdb.DropTables(ctx, db, m.tables(suffix)); err != nil {
		return fmt.Errorf("drop leftover tables: %w", err)
	}
	if err := pushdb.CreateTablesLike(ctx, db, pushdb.DefaultTables(), m.tables(suffix)); err != nil {
		return err
	}
	return pushdb.CarryPreLogRows(ctx, db, pushdb.DefaultTables(), m.tables(suffix))
}

func (m pushModel) Drop(ctx context.Context, db *sql.DB, suffix string) error {
	return pushdb.DropTables(ctx, db, m.tables(suffix))
}

func (m pushModel) Swap(ctx context.Context, db *sql.DB, suffix string) error {
	return pushdb.SwapTables(ctx, db, pushdb.DefaultTables(), m.tables(suffix))
}

func (m pushModel) Apply(ctx context.Context, t domain.TenantID, suffix string, events []domain.Envelope) (int, error) {
	return m.store.ApplyBatch(ctx, t, m.tables(suffix), events)
}

func (m pushModel) Checksum(ctx context.Context, t domain.TenantID, suffix string) (map[string]readmodels.TableSummary, error) {
	sum, err := m.store.Checksum(ctx, t, m.tables(suffix))
	if err != nil {
		return nil, err
	}
	live := pushdb.DefaultTables()
	return map[string]readmodels.TableSummary{live.Devices: sum.Devices, live.Mutes: sum.Mutes}, nil
}
