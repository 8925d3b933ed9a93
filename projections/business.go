package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/readmodels/business"
)

// The business projection: groups, memberships, relations and user profiles.
const (
	// ProjectionBusinessMySQL is the replay name of the business projection.
	ProjectionBusinessMySQL = "business-mysql"
	// GroupBusinessMySQL is its consumer group. Never renamed (see GroupMessagesMySQL).
	GroupBusinessMySQL = "imledger.proj.business.mysql.v1"
)

// BusinessStore is what the business projection needs of readmodels/business: ApplyBatch writes
// one tenant's events in one transaction (version-guarded, so idempotent), then invalidates the
// Redis cache entries they changed.
type BusinessStore interface {
	ApplyBatch(ctx context.Context, tenant domain.TenantID, consumerGroup string, tables business.Tables, events []domain.Envelope) (business.ApplyResult, error)
}

// Invalidations tells other nodes which cache keys changed so they drop what they hold in
// process (the transport backs it with im.cache.invalidate or Redis Pub/Sub). Publish must not
// block for long; losing a publication only delays freshness to the caches' TTL.
type Invalidations interface {
	Publish(ctx context.Context, tenant domain.TenantID, keys []string)
}

// isBusinessEvent reports whether t belongs to the business category.
func isBusinessEvent(t domain.EventType) bool {
	info, ok := domain.LookupEventType(t)
	return ok && info.Category == domain.CategoryBusiness
}

// BusinessMySQL is the business-mysql projection: every event of im.business.event goes to the
// tenant's im_groups, im_group_members, im_relations and im_users, and the
// Redis caches it made stale are invalidated after the commit and published to inv (optional).
// group "" means GroupBusinessMySQL. Unknown tenants are dead-lettered as for MessagesMySQL.
func BusinessMySQL(store BusinessStore, group string, inv Invalidations, log *slog.Logger) Projection {
	if group == "" {
		group = GroupBusinessMySQL
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return Projection{
		Name:          ProjectionBusinessMySQL,
		ConsumerGroup: group,
		Topics:        []string{tkafka.TopicBusinessEvent},
		Accept:        isBusinessEvent,
		Applier:       businessApplier{store: store, group: group, inv: inv, log: log},
	}
}

type businessApplier struct {
	store BusinessStore
	group string
	inv   Invalidations
	log   *slog.Logger
}

func (a businessApplier) Apply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
	res, err := a.store.ApplyBatch(ctx, tenant, a.group, business.DefaultTables(), events)
	if err != nil {
		return 0, businessErr(err)
	}
	if res.CacheErr != nil {
		a.log.WarnContext(ctx, "business caches not invalidated yet; they are retried and bounded by the cache TTL",
			"tenant_id", tenant.String(), "keys", len(res.Invalidated), "err", res.CacheErr)
	}
	if a.inv != nil && len(res.Invalidated) > 0 {
		a.inv.Publish(ctx, tenant, res.Invalidated)
	}
	return res.Applied, nil
}

// businessErr classifies an ApplyBatch error like msgstoreErr: a bad event is permanent, an event
// that arrived before its group exists is retried then dead-lettered, an unprovisioned tenant is
// ErrUnknownTenant, transient failures pass through.
func businessErr(err error) error {
	if errors.Is(err, domain.ErrRetryable) {
		return err
	}
	var ee *business.EventError
	if errors.As(err, &ee) {
		if errors.Is(err, domain.ErrInvalid) {
			return permanent(ReasonBadEvent, err)
		}
		return err
	}
	if errors.Is(err, domain.ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrUnknownTenant, err)
	}
	return err
}
