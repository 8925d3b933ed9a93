package account

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// ErrTokenRevoked is a token issued before its user's or tenant's not-before time: revoked by
// user.revoke_tokens, a ban, a password reset or a suspension of the tenant.
var ErrTokenRevoked = errors.New("token revoked")

// ErrSessionRevoked is a token of a login session that was signed out (user.session_ended.v1).
// It wraps ErrTokenRevoked: whoever only asks for that finds it too.
var ErrSessionRevoked = fmt.Errorf("login session signed out: %w", ErrTokenRevoked)

// GovernanceStore is what Governance needs of the event store. *eventstore.Store satisfies it.
type GovernanceStore interface {
	ReadStream(ctx context.Context, tenant domain.TenantID, streamID string, afterVersion int64, limit int) ([]domain.Envelope, error)
	AppendWithStatement(ctx context.Context, tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope, hook eventstore.StatementHook) ([]domain.Envelope, error)
}

var _ GovernanceStore = (*eventstore.Store)(nil)

// Change names what a governance command did to an account.
type Change string

// The governance changes.
const (
	ChangeBanned        Change = "banned"
	ChangeUnbanned      Change = "unbanned"
	ChangeKicked        Change = "kicked"
	ChangeTokensRevoked Change = "tokens_revoked"
	ChangePasswordReset Change = "password_reset"
	// ChangePasswordChanged is a password its user changed: the sessions but the one it was made
	// from end.
	ChangePasswordChanged Change = "password_changed"
	// ChangeContactChanged is a contact bound for password resets; it ends nothing.
	ChangeContactChanged Change = "contact_changed"
)

// EndsSessions reports whether the change ends the user's open sessions: every change but an
// unban and a contact change does.
func (c Change) EndsSessions() bool { return c != ChangeUnbanned && c != ChangeContactChanged }

// Notifier hears every committed governance change with the account's new status, after the
// commit. An implementation ends the user's sessions on every node and updates every node's
// Guard. It must not block for long; it is best effort (Guard.Run bounds a lost notification).
type Notifier interface {
	AccountChanged(ctx context.Context, st Status, change Change)
}

// GovernanceDeps are the collaborators of Governance.
type GovernanceDeps struct {
	// Pool is the event store's pool (account_status, credentials). Required.
	Pool *pgxpool.Pool
	// Store is the event store. Required.
	Store GovernanceStore
	// Accounts sets passwords (ResetPassword). Required.
	Accounts *Service
	// Guard is this node's guard; it learns every change at once. Optional.
	Guard *Guard
	// Notifier hears committed changes. Optional.
	Notifier Notifier
	// Keys destroys a user's data keys on erasure (Erase). Optional: without it Erase fails.
	Keys KeyDestroyer
	// Logger receives best-effort failures. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Governance bans and unbans users, ends their sessions, revokes their tokens and resets their
// passwords (account governance, seed 004 §12.3). Each change is an event on the user's account
// stream (domain.AccountStreamID) written with the account_status row in one transaction. It is
// safe for concurrent use.
type Governance struct {
	deps GovernanceDeps
	log  *slog.Logger
	now  func() time.Time
}

// NewGovernance validates deps and returns a Governance.
func NewGovernance(deps GovernanceDeps) (*Governance, error) {
	if deps.Pool == nil || deps.Store == nil || deps.Accounts == nil {
		return nil, errors.New("account: governance: Pool, Store and Accounts are required")
	}
	g := &Governance{deps: deps, log: deps.Logger, now: deps.Now}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.now == nil {
		g.now = time.Now
	}
	return g, nil
}

// Meta attributes a governance change: its actor (an administrator), trace and causing command.
type Meta struct {
	Actor       domain.Actor
	TraceID     string
	CausationID string
}

// GovernanceResult is the outcome of a governance command: the account after it, and whether
// nothing changed (a ban of a banned user).
type GovernanceResult struct {
	Status    Status
	Unchanged bool
}

// Ban bans user: logins and tokens are refused and the Notifier ends the user's sessions.
// A banned user is Unchanged. Errors: *domain.ValidationError; domain.ErrNotFound when the user has
// no account in tenant (nothing is written); domain.ErrRetryable.
func (g *Governance) Ban(ctx context.Context, tenant domain.TenantID, user domain.UserID, reason string, meta Meta) (GovernanceResult, error) {
	if err := g.deps.Accounts.requireAccount(ctx, tenant, user); err != nil {
		return GovernanceResult{}, err
	}
	return g.execute(ctx, tenant, user, meta, ChangeBanned, func(s domain.AccountState, now time.Time) ([]domain.PendingEvent, error) {
		return s.Ban(reason, now)
	})
}

// Unban lifts a ban; tokens issued before the ban stay refused. Errors as Ban.
func (g *Governance) Unban(ctx context.Context, tenant domain.TenantID, user domain.UserID, reason string, meta Meta) (GovernanceResult, error) {
	if err := g.deps.Accounts.requireAccount(ctx, tenant, user); err != nil {
		return GovernanceResult{}, err
	}
	return g.execute(ctx, tenant, user, meta, ChangeUnbanned, func(s domain.AccountState, now time.Time) ([]domain.PendingEvent, error) {
		return s.Unban(reason, now)
	})
}

// Kick records user.kicked.v1; the Notifier ends the user's sessions. Errors as Ban.
func (g *Governance) Kick(ctx context.Context, tenant domain.TenantID, user domain.UserID, reason string, meta Meta) (GovernanceResult, error) {
	if err := g.deps.Accounts.requireAccount(ctx, tenant, user); err != nil {
		return GovernanceResult{}, err
	}
	return g.execute(ctx, tenant, user, meta, ChangeKicked, func(s domain.AccountState, now time.Time) ([]domain.PendingEvent, error) {
		return s.Kick(reason, now)
	})
}

// RevokeTokens refuses every token of user issued before now. Errors as Ban.
func (g *Governance) RevokeTokens(ctx context.Context, tenant domain.TenantID, user domain.UserID, reason string, meta Meta) (GovernanceResult, error) {
	if err := g.deps.Accounts.requireAccount(ctx, tenant, user); err != nil {
		return GovernanceResult{}, err
	}
	return g.execute(ctx, tenant, user, meta, ChangeTokensRevoked, func(s domain.AccountState, now time.Time) ([]domain.PendingEvent, error) {
		return s.RevokeTokens(reason, now)
	})
}

// ResetPassword sets user's password, then records user.password_reset.v1, which revokes the
// user's tokens issued before it. Errors: *domain.ValidationError for a bad password;
// domain.ErrNotFound when the user has no account; domain.ErrRetryable.
func (g *Governance) ResetPassword(ctx context.Context, tenant domain.TenantID, user domain.UserID, password string, meta Meta) (GovernanceResult, error) {
	if err := g.deps.Accounts.SetPassword(ctx, tenant, user, password); err != nil {
		return GovernanceResult{}, err
	}
	return g.execute(ctx, tenant, user, meta, ChangePasswordReset, func(s domain.AccountState, now time.Time) ([]domain.PendingEvent, error) {
		return s.ResetPassword(now), nil
	})
}

// execute loads the account, decides, appends with the account_status row, and tells the Guard
// and the Notifier; a lost race is decided again.
func (g *Governance) execute(ctx context.Context, tenant domain.TenantID, user domain.UserID, meta Meta, change Change,
	decide func(domain.AccountState, time.Time) ([]domain.PendingEvent, error)) (GovernanceResult, error) {
	actor := meta.Actor
	if actor == (domain.Actor{}) {
		actor = domain.Actor{Type: domain.ActorSystem, ID: domain.SourceService}
	}
	// The account_status row, written in the statement of every event of the stream, is the
	// state to decide on: the Guard's copy of it when the node has one (current but for changes
	// of other nodes not yet heard of), else the row. The stream itself is folded when the copy
	// may not be current: after a lost race, and before answering that nothing changed (an
	// append from a stale copy fails on its expected version; doing nothing would not).
	fold := false
	for attempt := 1; ; attempt++ {
		load := g.current
		if fold {
			load = g.load
		}
		st, err := load(ctx, tenant, user)
		if err != nil {
			return GovernanceResult{}, err
		}
		events, err := decide(st, g.now())
		if err != nil {
			return GovernanceResult{}, err
		}
		if len(events) == 0 && !fold {
			fold = true
			continue
		}
		if len(events) == 0 {
			return GovernanceResult{Status: statusOf(tenant, st), Unchanged: true}, nil
		}
		envs, err := domain.NewEnvelopes(tenant, actor, events)
		if err != nil {
			return GovernanceResult{}, err
		}
		for i := range envs {
			envs[i].TraceID, envs[i].CausationID, envs[i].BizID = meta.TraceID, meta.CausationID, user.String()
		}
		// The row goes with the events in one statement, one round trip.
		next := st
		_, err = g.deps.Store.AppendWithStatement(ctx, tenant, domain.AccountStreamID(user), st.Version(), envs,
			func(prepared []domain.Envelope) (string, []any, error) {
				for _, e := range prepared {
					if err := next.Apply(e); err != nil {
						return "", nil, err
					}
				}
				sql, args := upsertStatusSQL(statusOf(tenant, next), g.now())
				return sql, args, nil
			})
		if errors.Is(err, domain.ErrConcurrency) && attempt < 5 {
			fold = true
			continue
		}
		if err != nil {
			return GovernanceResult{}, err
		}
		status := statusOf(tenant, next)
		if g.deps.Guard != nil {
			g.deps.Guard.Apply(status)
		}
		if g.deps.Notifier != nil {
			g.deps.Notifier.AccountChanged(context.WithoutCancel(ctx), status, change)
		}
		return GovernanceResult{Status: status}, nil
	}
}

// current is the account as this node's Guard holds it (its account_status row, kept by every
// node's notifications and a periodic reload; an account it does not hold has no row), without a
// round trip; without a Guard, the row itself.
func (g *Governance) current(ctx context.Context, tenant domain.TenantID, user domain.UserID) (domain.AccountState, error) {
	if g.deps.Guard == nil {
		return g.snapshot(ctx, tenant, user)
	}
	st := g.deps.Guard.Status(tenant, user)
	s, err := domain.RestoreAccountState(tenant, user, st.Version, st.Banned, st.NotBefore)
	return s.WithKeptSession(st.KeptSession, st.KeptSince), err
}

// snapshot reads the user's account_status row; an account without one has no governance
// events (or the row is missing, which the append's expected version then finds out).
func (g *Governance) snapshot(ctx context.Context, tenant domain.TenantID, user domain.UserID) (domain.AccountState, error) {
	var (
		banned           bool
		notBefore, since *time.Time
		kept             *string
		version          int64
	)
	err := g.deps.Pool.QueryRow(ctx, `SELECT banned, not_before, kept_session, kept_since, version FROM account_status
		WHERE tenant_id = $1 AND user_id = $2`, tenant.String(), user.Int64()).Scan(&banned, &notBefore, &kept, &since, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.NewAccountState(tenant, user)
	}
	if err != nil {
		return domain.AccountState{}, dbErr("read account status", err)
	}
	var nb time.Time
	if notBefore != nil {
		nb = *notBefore
	}
	st, err := domain.RestoreAccountState(tenant, user, version, banned, nb)
	if kept != nil && since != nil {
		st = st.WithKeptSession(*kept, *since)
	}
	return st, err
}

// load folds the user's account stream.
func (g *Governance) load(ctx context.Context, tenant domain.TenantID, user domain.UserID) (domain.AccountState, error) {
	st, err := domain.NewAccountState(tenant, user)
	if err != nil {
		return domain.AccountState{}, err
	}
	for {
		evs, err := g.deps.Store.ReadStream(ctx, tenant, domain.AccountStreamID(user), st.Version(), 0)
		if err != nil {
			return domain.AccountState{}, err
		}
		for _, e := range evs {
			if err := st.Apply(e); err != nil {
				return domain.AccountState{}, fmt.Errorf("account %s/%s: %w", tenant, user, err)
			}
		}
		if len(evs) == 0 {
			return st, nil
		}
	}
}

// upsertStatusSQL is the statement that writes st as the account_status row, with the events that
// made it (eventstore.StatementHook: nothing when none was appended).
func upsertStatusSQL(st Status, now time.Time) (string, []any) {
	var nb, since *time.Time
	if !st.NotBefore.IsZero() {
		nb = &st.NotBefore
	}
	var kept *string
	if st.KeptSession != "" {
		kept, since = &st.KeptSession, &st.KeptSince
	}
	return `INSERT INTO account_status (tenant_id, user_id, banned, not_before, kept_session, kept_since, version, updated_at)
		SELECT $1::text, $2::bigint, $3::boolean, $4::timestamptz, $5::text, $6::timestamptz, $7::bigint, $8::timestamptz
		WHERE EXISTS (SELECT 1 FROM appended)
		ON CONFLICT (tenant_id, user_id) DO UPDATE SET banned = EXCLUDED.banned, not_before = EXCLUDED.not_before,
			kept_session = EXCLUDED.kept_session, kept_since = EXCLUDED.kept_since,
			version = EXCLUDED.version, updated_at = EXCLUDED.updated_at`,
		[]any{st.Tenant.String(), st.User.Int64(), st.Banned, nb, kept, since, st.Version, now.UTC()}
}

// requireAccount answers domain.ErrNotFound unless user exists in tenant: its user stream holds
// its registration (registered, the check a registration and a login make), so a governance
// command never writes the events of a user that does not exist, or exists only in another
// tenant. A user found once is remembered: a user never stops existing, so repeated commands
// about the same users cost no lookup.
func (s *Service) requireAccount(ctx context.Context, tenant domain.TenantID, user domain.UserID) error {
	k := knownUser{tenant, user}
	s.usersMu.Lock()
	_, known := s.users[k]
	s.usersMu.Unlock()
	if known {
		return nil
	}
	ok, err := s.registered(ctx, tenant, user)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("user %s/%s: %w", tenant, user, domain.ErrNotFound)
	}
	s.usersMu.Lock()
	if s.users == nil || len(s.users) >= maxKnownUsers {
		s.users = make(map[knownUser]struct{})
	}
	s.users[k] = struct{}{}
	s.usersMu.Unlock()
	return nil
}

// SetPassword replaces user's password hash. Errors: *domain.ValidationError for a password
// Register would refuse; domain.ErrNotFound when the user has no account; domain.ErrRetryable
// when PostgreSQL failed or no hashing slot came free.
func (s *Service) SetPassword(ctx context.Context, tenant domain.TenantID, user domain.UserID, password string) error {
	if err := s.checkPassword(password); err != nil {
		return err
	}
	hash, err := s.hashPassword(ctx, password)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE credentials SET password_hash = $3 WHERE tenant_id = $1 AND user_id = $2 AND confirmed`,
		tenant.String(), user.Int64(), hash)
	if err != nil {
		return dbErr("set password", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("account %s/%s: %w", tenant, user, domain.ErrNotFound)
	}
	return nil
}
