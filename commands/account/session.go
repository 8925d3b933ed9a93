package account

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// SessionStore is what Sessions needs of the event store. *eventstore.Store satisfies it.
type SessionStore interface {
	ReadStream(ctx context.Context, tenant domain.TenantID, streamID string, afterVersion int64, limit int) ([]domain.Envelope, error)
	Append(ctx context.Context, tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope) ([]domain.Envelope, error)
	AppendWithStatement(ctx context.Context, tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope, hook eventstore.StatementHook) ([]domain.Envelope, error)
}

var _ SessionStore = (*eventstore.Store)(nil)

// SessionNotifier hears every login session signed out, after the commit. An implementation
// makes every node's Guard refuse the session's token and ends its connections. It must not
// block for long; it is best effort (Guard.Run bounds a lost notification).
type SessionNotifier interface {
	SessionEnded(ctx context.Context, tenant domain.TenantID, user domain.UserID, session string, expires time.Time)
}

// SessionDeps are the collaborators of Sessions.
type SessionDeps struct {
	// Store is the event store. Required.
	Store SessionStore
	// Guard is this node's guard; it learns every sign-out at once. Optional.
	Guard *Guard
	// Notifier hears every sign-out. Optional.
	Notifier SessionNotifier
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Sessions starts and ends login sessions: the sessions a login makes (its token names it), which
// the user lists and signs out one by one. Each session has a stream, domain.LoginSessionStreamID.
// It is safe for concurrent use.
type Sessions struct {
	d   SessionDeps
	now func() time.Time
}

// NewSessions validates deps and returns Sessions.
func NewSessions(deps SessionDeps) (*Sessions, error) {
	if deps.Store == nil {
		return nil, errors.New("account: sessions: Store is required")
	}
	s := &Sessions{d: deps, now: deps.Now}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// StartSession records a login session a login just made.
type StartSession struct {
	Tenant    domain.TenantID
	User      domain.UserID
	SessionID string // the token's sid (domain.CheckSessionID)
	// Device is the label the client gives its device, UserAgent its User-Agent, IPHint the
	// network of its address (see domain.UserSessionStarted); each may be empty.
	Device, UserAgent, IPHint string
	// StartedAt and ExpiresAt are the token's issue time and expiry.
	StartedAt, ExpiresAt time.Time
	TraceID              string
}

// StartSession appends user.session_started.v1 to the new session's stream (expected version 0).
// Errors: *domain.ValidationError for bad input; an error wrapping domain.ErrConcurrency when the
// session id was started before; domain.ErrRetryable when the event store failed.
func (s *Sessions) StartSession(ctx context.Context, cmd StartSession) error {
	ls, err := domain.NewLoginSession(cmd.Tenant, cmd.User, cmd.SessionID)
	if err != nil {
		return err
	}
	events, err := ls.Start(domain.SessionStart{Device: cmd.Device, UserAgent: cmd.UserAgent, IPHint: cmd.IPHint,
		StartedAt: cmd.StartedAt, ExpiresAt: cmd.ExpiresAt})
	if err != nil {
		return err
	}
	envs, err := s.envelopes(cmd.Tenant, cmd.User, cmd.TraceID, events)
	if err != nil {
		return err
	}
	if _, err := s.d.Store.Append(ctx, cmd.Tenant, domain.LoginSessionStreamID(cmd.User, cmd.SessionID), 0, envs); err != nil {
		return fmt.Errorf("start login session: %w", err)
	}
	return nil
}

// EndSession signs a login session of User out: its own logout (By "" or the session itself) or
// another session of the user signing it out.
type EndSession struct {
	Tenant    domain.TenantID
	User      domain.UserID
	SessionID string
	By        string
	TraceID   string
}

// SessionEnded is the outcome of EndSession: the expiry of the session's token, and whether it had
// ended before (nothing was written).
type SessionEnded struct {
	ExpiresAt time.Time
	Unchanged bool
}

// EndSession appends user.session_ended.v1 to the session's stream with its revoked_sessions row, in
// one statement, then tells the Guard and the Notifier: every node refuses the session's token
// from then on. A session that ended before is Unchanged (and told again, which costs nothing).
// Errors: *domain.ValidationError for a malformed id; *domain.DeniedError session_not_found for a
// session the user never had (in another user's or tenant's name too: the stream is the user's);
// domain.ErrRetryable when the event store failed.
func (s *Sessions) EndSession(ctx context.Context, cmd EndSession) (SessionEnded, error) {
	for attempt := 1; ; attempt++ {
		ls, err := s.load(ctx, cmd.Tenant, cmd.User, cmd.SessionID)
		if err != nil {
			return SessionEnded{}, err
		}
		now := s.now().UTC()
		events, err := ls.End(cmd.By, now)
		if err != nil {
			return SessionEnded{}, err
		}
		res := SessionEnded{ExpiresAt: ls.ExpiresAt(), Unchanged: len(events) == 0}
		if len(events) > 0 {
			err = s.appendEnd(ctx, cmd, ls, events, now)
		}
		if errors.Is(err, domain.ErrConcurrency) && attempt < 3 {
			continue
		}
		if err != nil {
			return SessionEnded{}, err
		}
		if s.d.Guard != nil {
			s.d.Guard.RevokeSession(cmd.Tenant, cmd.User, cmd.SessionID, res.ExpiresAt)
		}
		if s.d.Notifier != nil {
			s.d.Notifier.SessionEnded(context.WithoutCancel(ctx), cmd.Tenant, cmd.User, cmd.SessionID, res.ExpiresAt)
		}
		return res, nil
	}
}

// appendEnd appends the end of ls with its revoked_sessions row.
func (s *Sessions) appendEnd(ctx context.Context, cmd EndSession, ls domain.LoginSession, events []domain.PendingEvent, now time.Time) error {
	envs, err := s.envelopes(cmd.Tenant, cmd.User, cmd.TraceID, events)
	if err != nil {
		return err
	}
	_, err = s.d.Store.AppendWithStatement(ctx, cmd.Tenant, domain.LoginSessionStreamID(cmd.User, cmd.SessionID), ls.Version(), envs,
		func([]domain.Envelope) (string, []any, error) {
			return `INSERT INTO revoked_sessions (tenant_id, user_id, session_id, expires_at, revoked_at)
				SELECT $1::text, $2::bigint, $3::text, $4::timestamptz, $5::timestamptz WHERE EXISTS (SELECT 1 FROM appended)
				ON CONFLICT (tenant_id, user_id, session_id) DO NOTHING`,
				[]any{cmd.Tenant.String(), cmd.User.Int64(), cmd.SessionID, ls.ExpiresAt(), now}, nil
		})
	if err != nil {
		return fmt.Errorf("end login session: %w", err)
	}
	return nil
}

// load folds the session's stream.
func (s *Sessions) load(ctx context.Context, tenant domain.TenantID, user domain.UserID, id string) (domain.LoginSession, error) {
	ls, err := domain.NewLoginSession(tenant, user, id)
	if err != nil {
		return domain.LoginSession{}, err
	}
	evs, err := s.d.Store.ReadStream(ctx, tenant, domain.LoginSessionStreamID(user, id), 0, 0)
	if err != nil {
		return domain.LoginSession{}, err
	}
	for _, e := range evs {
		if err := ls.Apply(e); err != nil {
			return domain.LoginSession{}, fmt.Errorf("login session %s of %s/%s: %w", id, tenant, user, err)
		}
	}
	return ls, nil
}

// envelopes wraps a user's session events, the user being their actor.
func (s *Sessions) envelopes(tenant domain.TenantID, user domain.UserID, trace string, events []domain.PendingEvent) ([]domain.Envelope, error) {
	envs, err := domain.NewEnvelopes(tenant, domain.Actor{Type: domain.ActorUser, ID: user.String()}, events)
	if err != nil {
		return nil, err
	}
	for i := range envs {
		envs[i].TraceID, envs[i].BizID = trace, user.String()
	}
	return envs, nil
}
