package policy

import (
	"context"
	"log/slog"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
)

// Broadcaster is the group.Invalidator command handlers get: it invalidates this node's cache
// first, then publishes the keys to the other nodes. A failed publish is logged and otherwise
// ignored: the other nodes' TTL bounds the damage.
type Broadcaster struct {
	Local  group.Invalidator // this node's Policy
	Remote Publisher         // nil: single node
	Logger *slog.Logger      // nil: discard
}

var _ group.Invalidator = Broadcaster{}

// Invalidate implements group.Invalidator.
func (b Broadcaster) Invalidate(ctx context.Context, tenant domain.TenantID, streamIDs []string) {
	if b.Local != nil {
		b.Local.Invalidate(ctx, tenant, streamIDs)
	}
	if b.Remote == nil || len(streamIDs) == 0 {
		return
	}
	keys := make([]Key, len(streamIDs))
	for i, s := range streamIDs {
		keys[i] = Key{Tenant: tenant, StreamID: s}
	}
	if err := b.Remote.Publish(ctx, keys); err != nil && b.Logger != nil {
		b.Logger.WarnContext(ctx, "publish cache invalidation", "tenant_id", tenant.String(),
			"streams", len(streamIDs), "error", err)
	}
}
