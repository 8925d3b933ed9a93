package rest

import (
	"context"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/domain"
)

// RateLimiter counts a request against a tenant's rate limit of a kind (*ratelimit.Limiter).
// Allow returns nil, a *domain.RateLimitedError (429 rate_limited with Retry-After), or a
// retryable error when the counter store is down: limits fail closed (503 retry).
type RateLimiter interface {
	Allow(ctx context.Context, tenant domain.TenantID, kind domain.RateLimitKind, subject string) error
}

// limitRequest applies the request limits: per user for every authenticated request, per API
// key for every request carrying one (the key's id, never the key, names the counter). A public
// request's key counts against its tenant's limit too, in the same counter as the tenant's
// authenticated requests with it; a key that does not verify counts node-wide (the handler
// refuses it).
func (a *API) limitRequest(ctx huma.Context, p *Principal) error {
	if a.h.Limiter == nil {
		return nil
	}
	c := ctx.Context()
	if key := ctx.Header(HeaderAPIKey); key != "" {
		var tenant domain.TenantID
		if p != nil {
			tenant = p.Tenant
		} else if a.h.APIKeys != nil {
			tenant, _ = a.h.APIKeys.VerifyAPIKey(c, key) // cached; the handler verifies it again
		}
		if err := a.h.Limiter.Allow(c, tenant, domain.RateRESTAPIKey, account.APIKeyID(key)); err != nil {
			return err
		}
	}
	if p != nil {
		return a.h.Limiter.Allow(c, p.Tenant, domain.RateRESTUser, p.User.String())
	}
	return nil
}

// limitAction applies a per-user limit of kind (group creation, friend requests) to the
// request's principal.
func (a *API) limitAction(ctx context.Context, kind domain.RateLimitKind) error {
	if a.h.Limiter == nil {
		return nil
	}
	p := principal(ctx)
	if err := a.h.Limiter.Allow(ctx, p.Tenant, kind, p.User.String()); err != nil {
		return a.fail(ctx, err)
	}
	return nil
}
