package account

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/domain"
)

// ReasonContactMismatch refuses a password reset whose login name has no account with the
// verified phone number or e-mail address bound to it (or no account at all): one answer for
// both, so the reset tells nothing of which logins exist. *domain.DeniedError, answered 403.
const ReasonContactMismatch = "contact_mismatch"

// BindContact binds a verified phone number or e-mail address to an account for password resets.
type BindContact struct {
	Tenant domain.TenantID
	User   domain.UserID
	// Channel is "sms" or "email"; TargetHash the keyed hash of the address (the verification
	// service's, 64 hex digits), never the address.
	Channel, TargetHash string
	TraceID             string
}

// BindContact records user.contact_changed.v1 and then binds the contact of its channel to the
// account, replacing the one bound before. The event goes first: a failure after it leaves a
// record of a change to bind again, never a binding the log does not mention. The caller proves
// the contact (a verification code) and the user (the password) before.
// Errors: *domain.ValidationError for a bad channel or hash; domain.ErrNotFound for a user
// without an account; domain.ErrRetryable when PostgreSQL failed.
func (g *Governance) BindContact(ctx context.Context, cmd BindContact) (GovernanceResult, error) {
	if !isHexHash(cmd.TargetHash) {
		return GovernanceResult{}, &domain.ValidationError{Field: "target_hash", Reason: "bad_format", Detail: "64 hex digits"}
	}
	if err := g.deps.Accounts.requireAccount(ctx, cmd.Tenant, cmd.User); err != nil {
		return GovernanceResult{}, err
	}
	meta := Meta{Actor: domain.Actor{Type: domain.ActorUser, ID: cmd.User.String()}, TraceID: cmd.TraceID}
	res, err := g.execute(ctx, cmd.Tenant, cmd.User, meta, ChangeContactChanged, func(s domain.AccountState, now time.Time) ([]domain.PendingEvent, error) {
		return s.ChangeContact(cmd.Channel, now)
	})
	if err != nil {
		return GovernanceResult{}, err
	}
	_, err = g.deps.Pool.Exec(ctx, `INSERT INTO account_contacts (tenant_id, user_id, channel, target_hash, bound_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant_id, user_id, channel)
		DO UPDATE SET target_hash = EXCLUDED.target_hash, bound_at = EXCLUDED.bound_at`,
		cmd.Tenant.String(), cmd.User.Int64(), cmd.Channel, cmd.TargetHash, g.now().UTC())
	if err != nil {
		return GovernanceResult{}, dbErr("bind contact", err)
	}
	return res, nil
}

// ResetSubject returns the user whose login name is login in tenant and who bound the contact
// of channel whose keyed hash is targetHash: the account a verified password reset is for.
// Errors: *domain.DeniedError contact_mismatch when there is none (an unknown login, or another
// contact); domain.ErrRetryable when PostgreSQL failed.
func (s *Service) ResetSubject(ctx context.Context, tenant domain.TenantID, login, channel, targetHash string) (domain.UserID, error) {
	name, err := domain.NewLogin(login)
	if err != nil {
		return 0, domain.Deny(ReasonContactMismatch)
	}
	var uid int64
	err = s.pool.QueryRow(ctx, `SELECT c.user_id FROM credentials c
		JOIN account_contacts a ON a.tenant_id = c.tenant_id AND a.user_id = c.user_id
		WHERE c.tenant_id = $1 AND c.login = $2 AND c.confirmed AND a.channel = $3 AND a.target_hash = $4`,
		tenant.String(), name.String(), channel, targetHash).Scan(&uid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, domain.Deny(ReasonContactMismatch)
	}
	if err != nil {
		return 0, dbErr("find reset subject", err)
	}
	return domain.UserID(uid), nil
}

// isHexHash reports whether h is 64 lower-case hex digits.
func isHexHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if (h[i] < '0' || h[i] > '9') && (h[i] < 'a' || h[i] > 'f') {
			return false
		}
	}
	return true
}
