package projections

import (
	"context"
	"errors"
	"fmt"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
)

// tableProjection is the live projection of a read model kept in a fixed set of tables by one
// store of a readmodels package (push-settings, action-tokens, files-refs, login-sessions): the
// events of topics that accept accepts go to the tenant's live tables through apply, which the
// store version-guards. group "" means defaultGroup. Unknown tenants are dead-lettered as for
// MessagesMySQL.
func tableProjection(name, group, defaultGroup string, topics []string, accept func(domain.EventType) bool,
	apply func(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error)) Projection {
	if group == "" {
		group = defaultGroup
	}
	return Projection{
		Name:          name,
		ConsumerGroup: group,
		Topics:        topics,
		Accept:        accept,
		Applier: ApplierFunc(func(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
			n, err := apply(ctx, tenant, events)
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
