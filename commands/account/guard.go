package account

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/domain"
)

// Status is a user's account governance: banned, and the time before which its tokens are
// refused (zero: none).
type Status struct {
	Tenant    domain.TenantID
	User      domain.UserID
	Banned    bool
	NotBefore time.Time
	Version   int64
}

func statusOf(tenant domain.TenantID, s domain.AccountState) Status {
	return Status{Tenant: tenant, User: s.User(), Banned: s.Banned(), NotBefore: s.NotBefore(), Version: s.Version()}
}

// GuardConfig configures a Guard.
type GuardConfig struct {
	// RefreshInterval is how often the whole account_status table is read again, so a change
	// whose notification was lost reaches this node within it. Default 60 s.
	RefreshInterval time.Duration
}

// Guard is a node's in-process copy of account governance: every login and every request with
// a token is checked against it without I/O. Load fills it, Run reads it again every
// RefreshInterval, and Apply takes a change at once (from this node's Governance, or from another
// node over the fanout). It is safe for concurrent use.
type Guard struct {
	pool     *pgxpool.Pool
	interval time.Duration
	log      *slog.Logger

	mu       sync.RWMutex
	accounts map[guardKey]Status
}

type guardKey struct {
	tenant domain.TenantID
	user   domain.UserID
}

// NewGuard returns an empty Guard reading pool's account_status table. A nil logger discards.
func NewGuard(pool *pgxpool.Pool, cfg GuardConfig, logger *slog.Logger) (*Guard, error) {
	if pool == nil {
		return nil, errors.New("account: guard: Pool is required")
	}
	if cfg.RefreshInterval < 0 {
		return nil, errors.New("account: guard: refresh interval must not be negative")
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = time.Minute
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Guard{pool: pool, interval: cfg.RefreshInterval, log: logger, accounts: map[guardKey]Status{}}, nil
}

// Check refuses user of tenant when banned (*domain.DeniedError user_banned) or when the token
// was issued before the user's not-before time (ErrTokenRevoked). issuedAt zero is a login being
// decided, checked for the ban only.
func (g *Guard) Check(tenant domain.TenantID, user domain.UserID, issuedAt time.Time) error {
	g.mu.RLock()
	st, ok := g.accounts[guardKey{tenant, user}]
	g.mu.RUnlock()
	switch {
	case !ok:
		return nil
	case st.Banned:
		return domain.Deny(domain.ReasonUserBanned)
	case !issuedAt.IsZero() && issuedAt.Before(st.NotBefore):
		return fmt.Errorf("token of user %s issued %s, before %s: %w", user, issuedAt.Format(time.RFC3339Nano),
			st.NotBefore.Format(time.RFC3339Nano), ErrTokenRevoked)
	}
	return nil
}

// Status returns the guard's copy of user's status; the zero Status (with Tenant and User set)
// when the user has none.
func (g *Guard) Status(tenant domain.TenantID, user domain.UserID) Status {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if st, ok := g.accounts[guardKey{tenant, user}]; ok {
		return st
	}
	return Status{Tenant: tenant, User: user}
}

// Apply records st unless the guard holds a later version of the account.
func (g *Guard) Apply(st Status) {
	if st.Tenant.IsZero() || st.User <= 0 {
		return
	}
	k := guardKey{st.Tenant, st.User}
	g.mu.Lock()
	defer g.mu.Unlock()
	if cur, ok := g.accounts[k]; ok && cur.Version > st.Version {
		return
	}
	g.accounts[k] = st
}

// Load reads every account_status row into the guard. Errors: domain.ErrRetryable when
// PostgreSQL failed.
func (g *Guard) Load(ctx context.Context) error {
	rows, err := g.pool.Query(ctx, `SELECT tenant_id, user_id, banned, not_before, version FROM account_status`)
	if err != nil {
		return dbErr("load account status", err)
	}
	defer rows.Close()
	var all []Status
	for rows.Next() {
		var (
			tenant string
			uid    int64
			st     Status
			nb     *time.Time
		)
		if err := rows.Scan(&tenant, &uid, &st.Banned, &nb, &st.Version); err != nil {
			return dbErr("load account status", err)
		}
		t, err := domain.NewTenantID(tenant)
		if err != nil || uid <= 0 {
			continue
		}
		st.Tenant, st.User = t, domain.UserID(uid)
		if nb != nil {
			st.NotBefore = nb.UTC()
		}
		all = append(all, st)
	}
	if err := rows.Err(); err != nil {
		return dbErr("load account status", err)
	}
	for _, st := range all {
		g.Apply(st)
	}
	return nil
}

// Run calls Load every refresh interval until ctx ends; failures are logged and the guard keeps
// what it has. It returns nil.
func (g *Guard) Run(ctx context.Context) error {
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := g.Load(ctx); err != nil && ctx.Err() == nil {
				g.log.WarnContext(ctx, "account guard refresh failed; checking against what it holds", "err", err)
			}
		}
	}
}
