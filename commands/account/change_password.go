package account

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/commands/account/passhash"
	"github.com/imledger/imledger/domain"
)

// ReasonWrongPassword refuses a self-service request (a password change, binding a contact,
// deleting the account) whose current password is wrong: *domain.DeniedError, answered 403.
const ReasonWrongPassword = "wrong_password"

// ChangePassword asks to change a user's password, giving the current one.
type ChangePassword struct {
	Tenant   domain.TenantID
	User     domain.UserID
	Old, New string
	// Session is the login session the change is made from, which stays signed in; "" (a token
	// without a session) signs every session out.
	Session string
	TraceID string
}

// ChangePassword replaces the user's password and then records user.password_changed.v1, which
// refuses every token of the user issued before it but those of cmd.Session. The hash is replaced
// first: a login that read the old hash began before the event and its token is refused too.
//
// A change whose password was set but whose event failed is finished by running it again: when
// the old password no longer matches but the new one does, only the event is appended.
//
// Errors: *domain.ValidationError for a new password Register would refuse or a malformed
// session id (nothing is checked or written); *domain.DeniedError wrong_password; domain.ErrNotFound
// for a user without an account; domain.ErrRetryable when PostgreSQL failed, no hashing slot came
// free, or the password changed meanwhile.
func (g *Governance) ChangePassword(ctx context.Context, cmd ChangePassword) (GovernanceResult, error) {
	a := g.deps.Accounts
	if err := a.checkPassword(cmd.New); err != nil {
		return GovernanceResult{}, err
	}
	if cmd.Session != "" {
		if err := domain.CheckSessionID(cmd.Session); err != nil {
			return GovernanceResult{}, err
		}
	}
	hash, err := a.passwordHash(ctx, cmd.Tenant, cmd.User)
	if err != nil {
		return GovernanceResult{}, err
	}
	switch err := a.verifyPassword(ctx, cmd.Old, hash); {
	case err == nil:
		if err := a.replacePassword(ctx, cmd.Tenant, cmd.User, hash, cmd.New); err != nil {
			return GovernanceResult{}, err
		}
	case errors.Is(err, passhash.ErrMismatch):
		if a.verifyPassword(ctx, cmd.New, hash) != nil {
			return GovernanceResult{}, domain.Deny(ReasonWrongPassword)
		}
	default:
		return GovernanceResult{}, fmt.Errorf("change password of user %s: %w", cmd.User, err)
	}
	meta := Meta{Actor: domain.Actor{Type: domain.ActorUser, ID: cmd.User.String()}, TraceID: cmd.TraceID}
	return g.execute(ctx, cmd.Tenant, cmd.User, meta, ChangePasswordChanged, func(s domain.AccountState, now time.Time) ([]domain.PendingEvent, error) {
		return s.ChangePassword(cmd.Session, now)
	})
}

// CheckPassword checks the current password of user, as a request that needs it checks it again
// (deleting the account, binding a contact). Errors: *domain.DeniedError wrong_password;
// domain.ErrNotFound for a user without an account; domain.ErrRetryable when PostgreSQL failed or
// no hashing slot came free.
func (s *Service) CheckPassword(ctx context.Context, tenant domain.TenantID, user domain.UserID, password string) error {
	hash, err := s.passwordHash(ctx, tenant, user)
	if err != nil {
		return err
	}
	switch err := s.verifyPassword(ctx, password, hash); {
	case errors.Is(err, passhash.ErrMismatch):
		return domain.Deny(ReasonWrongPassword)
	case err != nil:
		return fmt.Errorf("check password of user %s: %w", user, err)
	}
	return nil
}

// CheckNewPassword reports the *domain.ValidationError Register would answer password with; nil
// when it would take it. It does no I/O: a caller that spends something on a new password (a
// reset token) checks first.
func (s *Service) CheckNewPassword(password string) error { return s.checkPassword(password) }

// passwordHash reads the password hash of user's confirmed account.
func (s *Service) passwordHash(ctx context.Context, tenant domain.TenantID, user domain.UserID) (string, error) {
	var hash string
	err := s.pool.QueryRow(ctx, `SELECT password_hash FROM credentials WHERE tenant_id = $1 AND user_id = $2 AND confirmed`,
		tenant.String(), user.Int64()).Scan(&hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("account %s/%s: %w", tenant, user, domain.ErrNotFound)
	}
	return hash, dbErr("read credential", err)
}

// replacePassword replaces old, user's hash, with a hash of password; a hash that changed
// meanwhile (another change won) is a retryable error and nothing is written.
func (s *Service) replacePassword(ctx context.Context, tenant domain.TenantID, user domain.UserID, old, password string) error {
	h, err := s.hashPassword(ctx, password)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE credentials SET password_hash = $3 WHERE tenant_id = $1 AND user_id = $2 AND password_hash = $4`,
		tenant.String(), user.Int64(), h, old)
	if err != nil {
		return dbErr("set password", err)
	}
	if tag.RowsAffected() == 0 {
		return domain.Retryable("set password", fmt.Errorf("the password of user %s changed meanwhile", user))
	}
	return nil
}
