package sessions

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Session is one realtime session of a user.
type Session struct {
	User      domain.UserID
	SessionID string
	Node      string
	UserAgent string
	OpenedAt  time.Time // zero when only the close was projected so far
	ClosedAt  time.Time // zero while the log has no close for the session
	Reason    string    // why it closed
}

// OnlineAt returns the sessions of tenant that were open at t (opened at or before t and not
// closed by then), ordered by user and session. limit <= 0 means 1000.
// Errors: domain.ErrNotFound (wrapped) for a tenant without a database, domain.ErrRetryable when
// MySQL is unreachable.
func (s *Store) OnlineAt(ctx context.Context, tenant domain.TenantID, t time.Time, limit int) ([]Session, error) {
	if limit <= 0 {
		limit = 1000
	}
	return s.query(ctx, tenant, "WHERE opened_at <= ? AND (closed_at IS NULL OR closed_at > ?) ORDER BY user_id, session_id LIMIT ?",
		t.UTC(), t.UTC(), limit)
}

// UserSessions returns user's sessions that overlap [from, to), oldest first. limit <= 0 means
// 1000. Errors as OnlineAt.
func (s *Store) UserSessions(ctx context.Context, tenant domain.TenantID, user domain.UserID, from, to time.Time, limit int) ([]Session, error) {
	if limit <= 0 {
		limit = 1000
	}
	return s.query(ctx, tenant, "WHERE user_id = ? AND (opened_at IS NULL OR opened_at < ?) AND (closed_at IS NULL OR closed_at >= ?)"+
		" ORDER BY opened_at, session_id LIMIT ?", user.Int64(), to.UTC(), from.UTC(), limit)
}

func (s *Store) query(ctx context.Context, tenant domain.TenantID, where string, args ...any) ([]Session, error) {
	tables := DefaultTables()
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	rows, err := db.QueryContext(ctx, "SELECT user_id, session_id, node, user_agent, opened_at, closed_at, close_reason FROM "+
		q(tables.Sessions)+" "+where, args...)
	if err != nil {
		return nil, tenantdb.WrapErr("sessions: query", err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var se Session
		var user int64
		var opened, closed sql.NullTime
		if err := rows.Scan(&user, &se.SessionID, &se.Node, &se.UserAgent, &opened, &closed, &se.Reason); err != nil {
			return nil, tenantdb.WrapErr("sessions: query", err)
		}
		se.User, se.OpenedAt, se.ClosedAt = domain.UserID(user), opened.Time, closed.Time
		out = append(out, se)
	}
	return out, tenantdb.WrapErr("sessions: query", rows.Err())
}
