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

// Status is a user's account governance: banned, and which of its tokens are refused: those
// issued before NotBefore (zero: none), but for the tokens of KeptSession issued at or after
// KeptSince (see domain.TokenCutoff).
type Status struct {
	Tenant      domain.TenantID
	User        domain.UserID
	Banned      bool
	NotBefore   time.Time
	KeptSession string
	KeptSince   time.Time
	Version     int64
}

// Cutoff returns which of the user's tokens the status admits.
func (s Status) Cutoff() domain.TokenCutoff {
	return domain.TokenCutoff{NotBefore: s.NotBefore, KeptSession: s.KeptSession, KeptSince: s.KeptSince}
}

func statusOf(tenant domain.TenantID, s domain.AccountState) Status {
	c := s.Cutoff()
	return Status{Tenant: tenant, User: s.User(), Banned: s.Banned(), NotBefore: c.NotBefore, KeptSession: c.KeptSession,
		KeptSince: c.KeptSince, Version: s.Version()}
}

// GuardConfig configures a Guard.
type GuardConfig struct {
	// RefreshInterval is how often the whole account_status table (and revoked_sessions) is read
	// again, so a change whose notification was lost reaches this node within it. Default 60 s.
	RefreshInterval time.Duration
	// RevokedGrace is how long past its token's expiry a signed-out session is remembered, in
	// memory and in revoked_sessions: at least the token verifier's clock-skew leeway
	// (auth.leeway), which still accepts a token that long after it expired. Default 5 min.
	RevokedGrace time.Duration
}

// Guard is a node's in-process copy of account governance: every login and every request with
// a token is checked against it without I/O. Load fills it, Run reads it again every
// RefreshInterval, and Apply takes a change at once (from this node's Governance, or from another
// node over the fanout). It is safe for concurrent use.
type Guard struct {
	pool     *pgxpool.Pool
	interval time.Duration
	grace    time.Duration
	log      *slog.Logger

	mu       sync.RWMutex
	accounts map[guardKey]Status
	// revoked holds the signed-out sessions of each user whose tokens have not expired, with
	// the expiry of each session's token.
	revoked map[guardKey]map[string]time.Time
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
	if cfg.RefreshInterval < 0 || cfg.RevokedGrace < 0 {
		return nil, errors.New("account: guard: refresh interval and revoked grace must not be negative")
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = time.Minute
	}
	if cfg.RevokedGrace == 0 {
		cfg.RevokedGrace = 5 * time.Minute
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Guard{pool: pool, interval: cfg.RefreshInterval, grace: cfg.RevokedGrace, log: logger,
		accounts: map[guardKey]Status{}, revoked: map[guardKey]map[string]time.Time{}}, nil
}

// Check is CheckSession for a token without a login session.
func (g *Guard) Check(tenant domain.TenantID, user domain.UserID, issuedAt time.Time) error {
	return g.CheckSession(tenant, user, issuedAt, "")
}

// CheckSession refuses a token of user of tenant, issued at issuedAt for login session session
// ("" for a token without one): *domain.DeniedError user_banned when the user is banned;
// ErrSessionRevoked when the session was signed out; ErrTokenRevoked when the account's cutoff
// refuses the token (domain.TokenCutoff.Admits). issuedAt zero is a login being decided,
// checked for the ban only. It does no I/O.
func (g *Guard) CheckSession(tenant domain.TenantID, user domain.UserID, issuedAt time.Time, session string) error {
	k := guardKey{tenant, user}
	g.mu.RLock()
	st, ok := g.accounts[k]
	_, revoked := g.revoked[k][session]
	g.mu.RUnlock()
	switch {
	case ok && st.Banned:
		return domain.Deny(domain.ReasonUserBanned)
	case revoked && session != "" && !issuedAt.IsZero():
		return fmt.Errorf("login session %s of user %s: %w", session, user, ErrSessionRevoked)
	case ok && !st.Cutoff().Admits(issuedAt, session):
		return fmt.Errorf("token of user %s issued %s, before %s: %w", user, issuedAt.Format(time.RFC3339Nano),
			st.NotBefore.Format(time.RFC3339Nano), ErrTokenRevoked)
	}
	return nil
}

// RevokeSession refuses the tokens of user's login session from now on, until expires (its
// token's expiry) plus the guard's RevokedGrace.
func (g *Guard) RevokeSession(tenant domain.TenantID, user domain.UserID, session string, expires time.Time) {
	if tenant.IsZero() || user <= 0 || session == "" {
		return
	}
	k := guardKey{tenant, user}
	g.mu.Lock()
	defer g.mu.Unlock()
	set := g.revoked[k]
	if set == nil {
		set = map[string]time.Time{}
		g.revoked[k] = set
	}
	if cur, ok := set[session]; !ok || expires.After(cur) {
		set[session] = expires
	}
}

// pruneRevoked forgets the signed-out sessions whose tokens expired more than the grace ago.
func (g *Guard) pruneRevoked(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, set := range g.revoked {
		for s, exp := range set {
			if now.After(exp.Add(g.grace)) {
				delete(set, s)
			}
		}
		if len(set) == 0 {
			delete(g.revoked, k)
		}
	}
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

// Load reads every account_status row into the guard, and every signed-out session whose token
// has not expired (revoked_sessions). Errors: domain.ErrRetryable when PostgreSQL failed.
func (g *Guard) Load(ctx context.Context) error {
	rows, err := g.pool.Query(ctx, `SELECT tenant_id, user_id, banned, not_before, kept_session, kept_since, version FROM account_status`)
	if err != nil {
		return dbErr("load account status", err)
	}
	defer rows.Close()
	var all []Status
	for rows.Next() {
		var (
			tenant    string
			uid       int64
			st        Status
			nb, since *time.Time
			kept      *string
		)
		if err := rows.Scan(&tenant, &uid, &st.Banned, &nb, &kept, &since, &st.Version); err != nil {
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
		if kept != nil && since != nil {
			st.KeptSession, st.KeptSince = *kept, since.UTC()
		}
		all = append(all, st)
	}
	if err := rows.Err(); err != nil {
		return dbErr("load account status", err)
	}
	for _, st := range all {
		g.Apply(st)
	}
	return g.loadRevoked(ctx)
}

// loadRevoked reads the signed-out sessions whose tokens have not expired (within the grace).
func (g *Guard) loadRevoked(ctx context.Context) error {
	rows, err := g.pool.Query(ctx, `SELECT tenant_id, user_id, session_id, expires_at FROM revoked_sessions
		WHERE expires_at > now() - make_interval(secs => $1)`, g.grace.Seconds())
	if err != nil {
		return dbErr("load revoked sessions", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			tenant, session string
			uid             int64
			exp             time.Time
		)
		if err := rows.Scan(&tenant, &uid, &session, &exp); err != nil {
			return dbErr("load revoked sessions", err)
		}
		if t, err := domain.NewTenantID(tenant); err == nil {
			g.RevokeSession(t, domain.UserID(uid), session, exp.UTC())
		}
	}
	return dbErr("load revoked sessions", rows.Err())
}

// purgeRevoked deletes the revoked_sessions rows whose tokens expired more than the grace ago.
func (g *Guard) purgeRevoked(ctx context.Context) error {
	_, err := g.pool.Exec(ctx, `DELETE FROM revoked_sessions WHERE expires_at < now() - make_interval(secs => $1)`, g.grace.Seconds())
	return dbErr("purge revoked sessions", err)
}

// Run calls Load every refresh interval until ctx ends, forgetting the signed-out sessions whose
// tokens expired (and deleting their rows); failures are logged and the guard keeps what it has.
// It returns nil.
func (g *Guard) Run(ctx context.Context) error {
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			g.pruneRevoked(time.Now())
			if err := g.purgeRevoked(ctx); err != nil && ctx.Err() == nil {
				g.log.WarnContext(ctx, "could not delete expired session revocations; the next refresh tries again", "err", err)
			}
			if err := g.Load(ctx); err != nil && ctx.Err() == nil {
				g.log.WarnContext(ctx, "account guard refresh failed; checking against what it holds", "err", err)
			}
		}
	}
}
