package login

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/internal/eventdecode"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// EventError says which event of a batch could not be applied; Err wraps domain.ErrInvalid for
// an event that can never be applied (bad payload, another tenant, a stream that does not match).
type EventError = readmodels.EventError

// Accepts reports whether the read model applies events of type t: the login session events and
// the account stream events that move the cutoff.
func Accepts(t domain.EventType) bool {
	switch t {
	case domain.EventUserSessionStarted, domain.EventUserSessionEnded, domain.EventUserBanned, domain.EventUserTokensRevoked,
		domain.EventUserPasswordReset, domain.EventUserPasswordChanged, domain.EventUserErased:
		return true
	}
	return false
}

// Statements of the session fold. The columns of the start and of the end are each written by
// one event type only, so the two may arrive in either order and again: a row's final state is
// the same. The version is assigned last (MySQL evaluates the assignments in order).
const (
	startStmt = "INSERT INTO %s (user_id, session_id, device, user_agent, ip_hint, started_at, expires_at, version)" +
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE device = VALUES(device), user_agent = VALUES(user_agent)," +
		" ip_hint = VALUES(ip_hint), started_at = VALUES(started_at), expires_at = VALUES(expires_at)," +
		" version = GREATEST(version, VALUES(version))"
	endStmt = "INSERT INTO %s (user_id, session_id, expires_at, ended_at, end_reason, version) VALUES (?, ?, ?, ?, ?, ?)" +
		" ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at), ended_at = VALUES(ended_at), end_reason = VALUES(end_reason)," +
		" version = GREATEST(version, VALUES(version))"
)

// op is one decoded event: a session statement, or a cutoff event to fold (payload set).
type op struct {
	stmt    string
	args    []any
	user    domain.UserID
	version int64
	payload any
}

// decodeOne decodes an event the read model applies and checks it against its stream.
func decodeOne(tables Tables) func(int, domain.Envelope) (op, error) {
	sessions := tableset.Quote(tables.Sessions)
	return func(_ int, env domain.Envelope) (op, error) {
		if !Accepts(env.EventType) {
			return op{}, nil
		}
		info, _ := domain.LookupEventType(env.EventType)
		p := info.Payload()
		if err := env.Decode(p); err != nil {
			return op{}, eventdecode.Bad("payload", err.Error())
		}
		user, stream := streamOf(p)
		if user <= 0 || env.StreamID != stream {
			return op{}, eventdecode.Bad("stream_id", fmt.Sprintf("%s names stream %q, the payload belongs to %q", env.EventType, env.StreamID, stream))
		}
		v := env.StreamVersion
		switch e := p.(type) {
		case *domain.UserSessionStarted:
			return op{stmt: fmt.Sprintf(startStmt, sessions), args: []any{e.User.Int64(), e.SessionID, e.Device, e.UserAgent, e.IPHint,
				readmodels.Millis(e.StartedAt), readmodels.Millis(e.ExpiresAt), v}}, nil
		case *domain.UserSessionEnded:
			return op{stmt: fmt.Sprintf(endStmt, sessions), args: []any{e.User.Int64(), e.SessionID, readmodels.Millis(e.ExpiresAt),
				readmodels.Millis(e.EndedAt), e.Reason, v}}, nil
		}
		return op{user: user, version: v, payload: p}, nil
	}
}

// streamOf returns the user an accepted payload is about and the stream it belongs to.
func streamOf(p any) (domain.UserID, string) {
	var u domain.UserID
	switch e := p.(type) {
	case *domain.UserSessionStarted:
		if domain.CheckSessionID(e.SessionID) != nil {
			return 0, ""
		}
		return e.User, domain.LoginSessionStreamID(e.User, e.SessionID)
	case *domain.UserSessionEnded:
		if domain.CheckSessionID(e.SessionID) != nil {
			return 0, ""
		}
		return e.User, domain.LoginSessionStreamID(e.User, e.SessionID)
	case *domain.UserBanned:
		u = e.User
	case *domain.UserTokensRevoked:
		u = e.User
	case *domain.UserPasswordReset:
		u = e.User
	case *domain.UserPasswordChanged:
		u = e.User
	case *domain.UserErased:
		u = e.User
	}
	return u, domain.AccountStreamID(u)
}

// ApplyBatch folds one tenant's events into tables in one transaction and returns how many
// changed a row. Events of other types are ignored. A session's row takes its start and its end
// in either order; a user's cutoff row takes only account events newer than the last it folded.
//
// Errors: an *EventError wrapping domain.ErrInvalid for an event that can never be applied;
// domain.ErrNotFound (wrapped) for a tenant without a database; domain.ErrRetryable when MySQL is
// unreachable.
func (s *Store) ApplyBatch(ctx context.Context, tenant domain.TenantID, tables Tables, events []domain.Envelope) (n int, err error) {
	if err := tables.Validate(); err != nil {
		return 0, err
	}
	ops, err := eventdecode.Batch(tenant, events, decodeOne(tables), func(i int, id uuid.UUID, err error) error {
		return &EventError{Index: i, EventID: id, Err: err}
	})
	if err != nil {
		return 0, fmt.Errorf("login: apply: %w", err)
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return 0, fmt.Errorf("login: apply: %w", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, tenantdb.WrapErr("login: apply: begin", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	for _, o := range ops {
		var changed bool
		switch {
		case o.stmt != "":
			res, err := tx.ExecContext(ctx, o.stmt, o.args...)
			if err != nil {
				return 0, tenantdb.WrapErr("login: apply", err)
			}
			k, _ := res.RowsAffected()
			changed = k > 0
		case o.payload != nil:
			if changed, err = foldCutoff(ctx, tx, tables.Cutoffs, o); err != nil {
				return 0, err
			}
		}
		if changed {
			n++
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, tenantdb.WrapErr("login: apply: commit", err)
	}
	return n, nil
}

// foldCutoff folds a cutoff event into its user's row of table, unless the row has folded it (or
// a newer event) already.
func foldCutoff(ctx context.Context, tx *sql.Tx, table string, o op) (bool, error) {
	q := tableset.Quote(table)
	var (
		c         domain.TokenCutoff
		nb, since sql.NullTime
		version   int64
	)
	err := tx.QueryRowContext(ctx, "SELECT not_before, kept_session, kept_since, version FROM "+q+" WHERE user_id = ? FOR UPDATE",
		o.user.Int64()).Scan(&nb, &c.KeptSession, &since, &version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return false, tenantdb.WrapErr("login: read cutoff", err)
	case version >= o.version:
		return false, nil
	}
	c.NotBefore, c.KeptSince = nb.Time, since.Time
	c, _ = domain.FoldCutoff(c, o.payload)
	_, err = tx.ExecContext(ctx, "INSERT INTO "+q+" (user_id, not_before, kept_session, kept_since, version) VALUES (?, ?, ?, ?, ?)"+
		" ON DUPLICATE KEY UPDATE not_before = VALUES(not_before), kept_session = VALUES(kept_session),"+
		" kept_since = VALUES(kept_since), version = VALUES(version)",
		o.user.Int64(), nullTime(c.NotBefore), c.KeptSession, nullTime(c.KeptSince), o.version)
	if err != nil {
		return false, tenantdb.WrapErr("login: write cutoff", err)
	}
	return true, nil
}

// nullTime is t to the millisecond, or NULL when it is zero.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return readmodels.Millis(t)
}
