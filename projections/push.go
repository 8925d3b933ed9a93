package projections

import (
	"context"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
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
	live := pushdb.DefaultTables()
	return tableProjection(ProjectionPushSettings, group, GroupPushSettings, []string{tkafka.TopicBusinessEvent}, isPushEvent,
		func(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
			return store.ApplyBatch(ctx, tenant, live, events)
		})
}
