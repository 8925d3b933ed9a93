package rest

import (
	"context"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/auth"
)

// Gate checks requests against the tenant registry and account governance. Refusals are
// *domain.DeniedError values (tenant_not_found, tenant_suspended, registration_closed,
// user_banned), answered 403 with the reason, or errors wrapping account.ErrTokenRevoked,
// answered 401 token_revoked.
type Gate interface {
	// CheckTenant refuses a tenant that does not exist or is suspended.
	CheckTenant(ctx context.Context, tenant domain.TenantID) error
	// CanRegister is CheckTenant plus the tenant's registration_open setting.
	CanRegister(ctx context.Context, tenant domain.TenantID) error
	// Admit refuses a principal whose tenant CheckTenant refuses, whose user is banned, or
	// whose token (IssuedAt) predates the user's or the tenant's not-before time. A zero
	// IssuedAt (a login being decided) is checked for the tenant and the ban only.
	Admit(ctx context.Context, p auth.Principal) error
	// MaxContentBytes is the tenant's limit on a message's content; 0 for the configured one.
	MaxContentBytes(ctx context.Context, tenant domain.TenantID) int
}

// contentLimit is tenant's limit on a message's content, sent or edited: the Gate's, capped by
// Config.MaxContentBytes.
func (a *API) contentLimit(ctx context.Context, tenant domain.TenantID) int {
	limit := a.cfg.MaxContentBytes
	if limit <= 0 {
		limit = domain.DefaultMaxContentBytes
	}
	if a.h.Gate != nil {
		if n := a.h.Gate.MaxContentBytes(ctx, tenant); n > 0 && n < limit {
			return n
		}
	}
	return limit
}
