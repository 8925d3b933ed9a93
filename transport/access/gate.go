package access

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/rest"
	"github.com/imledger/imledger/transport/ws"
)

// Gate implements rest.Gate and ws.Gate over a node's tenant cache and account guard: no I/O for
// a tenant the cache knows.
type Gate struct {
	tenants    *tenant.Cache
	accounts   *account.Guard
	maxContent int
}

var (
	_ rest.Gate = (*Gate)(nil)
	_ ws.Gate   = (*Gate)(nil)
)

// NewGate returns a Gate; maxContent is the node's send.max_content_bytes, the ceiling of every
// tenant's limit (0: domain.DefaultMaxContentBytes).
func NewGate(tenants *tenant.Cache, accounts *account.Guard, maxContent int) (*Gate, error) {
	if tenants == nil || accounts == nil {
		return nil, errors.New("access: the tenant cache and the account guard are required")
	}
	if maxContent <= 0 {
		maxContent = domain.DefaultMaxContentBytes
	}
	return &Gate{tenants: tenants, accounts: accounts, maxContent: maxContent}, nil
}

// CheckTenant refuses a tenant that does not exist (tenant_not_found) or is suspended
// (tenant_suspended).
func (g *Gate) CheckTenant(ctx context.Context, t domain.TenantID) error {
	_, err := g.tenants.Check(ctx, t)
	return err
}

// CanRegister is CheckTenant plus the tenant's registration_open setting (registration_closed).
func (g *Gate) CanRegister(ctx context.Context, t domain.TenantID) error {
	info, err := g.tenants.Check(ctx, t)
	if err != nil {
		return err
	}
	if !info.Settings.Registration() {
		return domain.Deny(domain.ReasonRegistrationClosed)
	}
	return nil
}

// Admit refuses p when its tenant is refused, its user is banned, its login session was signed
// out (account.ErrSessionRevoked), or its token was issued before the tenant's last suspension or
// the user's not-before time (account.ErrTokenRevoked).
func (g *Gate) Admit(ctx context.Context, p auth.Principal) error {
	info, err := g.tenants.Check(ctx, p.Tenant)
	if err != nil {
		return err
	}
	if !p.IssuedAt.IsZero() && p.IssuedAt.Before(info.NotBefore) {
		return fmt.Errorf("token issued %s, before tenant %s was suspended at %s: %w", p.IssuedAt.Format(time.RFC3339Nano),
			p.Tenant, info.NotBefore.Format(time.RFC3339Nano), account.ErrTokenRevoked)
	}
	return g.accounts.CheckSession(p.Tenant, p.User, p.IssuedAt, p.Session)
}

// MaxContentBytes is the tenant's limit on a message's content, at most the node's; the node's
// when the tenant is not known.
func (g *Gate) MaxContentBytes(ctx context.Context, t domain.TenantID) int {
	info, err := g.tenants.Lookup(ctx, t)
	if err != nil {
		return g.maxContent
	}
	return info.Settings.ContentLimit(g.maxContent)
}
