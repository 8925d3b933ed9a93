package login

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Store reads and writes the login session tables of each tenant's database. It is safe for
// concurrent use. Errors wrap domain.ErrRetryable when MySQL is unreachable.
type Store struct {
	router *tenantdb.Router
}

// New returns a Store over the tenant databases of router.
func New(router *tenantdb.Router) *Store { return &Store{router: router} }

// MaxListed bounds the sessions ActiveSessions returns: the most recently started ones.
const MaxListed = 200

// Session is an active login session as the read model holds it.
type Session struct {
	SessionID string
	Device    string
	UserAgent string
	IPHint    string
	StartedAt time.Time
	ExpiresAt time.Time
}

// ActiveSessions returns user's login sessions that have started, have not ended, whose tokens
// expire after now and that the user's cutoff admits (a revocation or a password change after
// them ended them), most recently started first, at most MaxListed. A session started or ended
// a moment ago shows once the projection has applied its event.
func (s *Store) ActiveSessions(ctx context.Context, tenant domain.TenantID, user domain.UserID, now time.Time) ([]Session, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("login: sessions: %w", err)
	}
	cutoff, err := s.cutoff(ctx, db, user)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT session_id, device, user_agent, ip_hint, started_at, expires_at FROM im_login_sessions"+
		" WHERE user_id = ? AND ended_at IS NULL AND started_at IS NOT NULL AND expires_at > ? ORDER BY started_at DESC, session_id LIMIT ?",
		user.Int64(), readmodels.Millis(now), MaxListed)
	if err != nil {
		return nil, tenantdb.WrapErr("login: sessions", err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var x Session
		if err := rows.Scan(&x.SessionID, &x.Device, &x.UserAgent, &x.IPHint, &x.StartedAt, &x.ExpiresAt); err != nil {
			return nil, tenantdb.WrapErr("login: sessions", err)
		}
		x.StartedAt, x.ExpiresAt = x.StartedAt.UTC(), x.ExpiresAt.UTC()
		if cutoff.Admits(x.StartedAt, x.SessionID) {
			out = append(out, x)
		}
	}
	return out, tenantdb.WrapErr("login: sessions", rows.Err())
}

// cutoff reads user's cutoff; the zero TokenCutoff when there is none.
func (s *Store) cutoff(ctx context.Context, db *sql.DB, user domain.UserID) (domain.TokenCutoff, error) {
	var (
		c         domain.TokenCutoff
		nb, since sql.NullTime
	)
	err := db.QueryRowContext(ctx, "SELECT not_before, kept_session, kept_since FROM im_login_cutoffs WHERE user_id = ?",
		user.Int64()).Scan(&nb, &c.KeptSession, &since)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.TokenCutoff{}, nil
	}
	if err != nil {
		return c, tenantdb.WrapErr("login: cutoff", err)
	}
	c.NotBefore, c.KeptSince = nb.Time.UTC(), since.Time.UTC()
	return c, nil
}

// Checksum summarises each table of tables so two copies (the live tables and a rebuild) can be
// compared: each row hashes every column the events decide. The summaries are keyed by the live
// table names.
func (s *Store) Checksum(ctx context.Context, tenant domain.TenantID, tables Tables) (map[string]readmodels.TableSummary, error) {
	if err := tables.Validate(); err != nil {
		return nil, err
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("login: checksum: %w", err)
	}
	live := DefaultTables()
	sessions, err := tableset.Summarize(ctx, db, pkgName, tables.Sessions, "user_id, session_id, device, user_agent, ip_hint, "+
		"COALESCE(started_at, ''), COALESCE(expires_at, ''), COALESCE(ended_at, ''), end_reason, version")
	if err != nil {
		return nil, err
	}
	cutoffs, err := tableset.Summarize(ctx, db, pkgName, tables.Cutoffs, "user_id, COALESCE(not_before, ''), kept_session, "+
		"COALESCE(kept_since, ''), version")
	if err != nil {
		return nil, err
	}
	return map[string]readmodels.TableSummary{live.Sessions: sessions, live.Cutoffs: cutoffs}, nil
}
