package policy

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/domain"
)

// CanSeePresence returns nil when viewer may read user's presence (online state and last seen)
// now: relations decide who sees presence (seed 000 §5.2), and a user who blocks viewer hides it
// from viewer. Anyone else of the tenant may read it, and a user always reads their own. The
// relation comes from the same cache as CanSend, with the same staleness guarantee: a block
// takes effect on this node when the block command answers, on the others after the
// invalidation arrives (at most TTL). Refusal: *domain.DeniedError blocked. A relation that
// could not be read is a domain.ErrRetryable error; bad ids are *domain.ValidationError.
func (p *Policy) CanSeePresence(ctx context.Context, tenant domain.TenantID, viewer, user domain.UserID) error {
	if viewer == user {
		return nil
	}
	rel, err := p.loader.Relation(ctx, tenant, viewer, user, p.cfg.TTL)
	if err != nil {
		return fmt.Errorf("presence policy: %w", err)
	}
	if rel.Blocks(user, viewer) {
		return domain.Deny(domain.ReasonBlocked)
	}
	return nil
}
