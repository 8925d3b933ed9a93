package access

import (
	"context"

	"github.com/imledger/imledger/commands/verify"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/ratelimit"
	"github.com/imledger/imledger/transport/rest"
)

var (
	_ rest.CodePolicy    = (*Gate)(nil)
	_ ratelimit.Settings = (*Gate)(nil)
)

// RequiresCode reports whether tenant requires a verification code of scene to register
// (register_requires_code) or log in (login_requires_code). An unknown tenant requires none:
// CheckTenant refuses it anyway.
func (g *Gate) RequiresCode(ctx context.Context, tenant domain.TenantID, scene verify.Scene) bool {
	info, err := g.tenants.Lookup(ctx, tenant)
	if err != nil {
		return false
	}
	switch scene {
	case verify.SceneRegister:
		return info.Settings.RegisterCode()
	case verify.SceneLogin:
		return info.Settings.LoginCode()
	}
	return false
}

// RateLimits returns tenant's rate_limits setting from the tenant cache; none for a tenant the
// cache cannot give.
func (g *Gate) RateLimits(ctx context.Context, tenant domain.TenantID) domain.RateLimits {
	info, err := g.tenants.Lookup(ctx, tenant)
	if err != nil {
		return nil
	}
	return info.Settings.RateLimits
}
