package admin

import (
	"context"
	"time"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/domain"
)

// UserData is the result data of the user commands.
type UserData struct {
	UserID    string `json:"user_id"`
	Banned    bool   `json:"banned"`
	NotBefore string `json:"not_before,omitempty"`
	Unchanged bool   `json:"unchanged"`
}

func userData(res account.GovernanceResult) UserData {
	d := UserData{UserID: res.Status.User.String(), Banned: res.Status.Banned, Unchanged: res.Unchanged}
	if !res.Status.NotBefore.IsZero() {
		d.NotBefore = res.Status.NotBefore.UTC().Format(time.RFC3339Nano)
	}
	return d
}

func (r run) accountMeta() account.Meta {
	return account.Meta{Actor: r.actor(), TraceID: r.TraceID, CausationID: r.causation()}
}

type governanceFunc func(ctx context.Context, t domain.TenantID, u domain.UserID, reason string, meta account.Meta) (account.GovernanceResult, error)

func (d *dispatcher) userReason(ctx context.Context, r run, fn governanceFunc) (any, error) {
	p := r.payload.(*domain.UserReasonPayload)
	if err := required("user_id", p.UserID); err != nil {
		return nil, err
	}
	res, err := fn(ctx, r.tenant, p.UserID, p.Reason, r.accountMeta())
	if err != nil {
		return nil, err
	}
	return userData(res), nil
}

func (d *dispatcher) userBan(ctx context.Context, r run) (any, error) {
	return d.userReason(ctx, r, d.h.Accounts.Ban)
}

func (d *dispatcher) userUnban(ctx context.Context, r run) (any, error) {
	return d.userReason(ctx, r, d.h.Accounts.Unban)
}

func (d *dispatcher) userKick(ctx context.Context, r run) (any, error) {
	return d.userReason(ctx, r, d.h.Accounts.Kick)
}

func (d *dispatcher) userRevokeTokens(ctx context.Context, r run) (any, error) {
	return d.userReason(ctx, r, d.h.Accounts.RevokeTokens)
}

// userErase erases the user (account.Governance.Erase); the reason is not recorded, since
// user.erased.v1 carries nothing but the user and the time.
func (d *dispatcher) userErase(ctx context.Context, r run) (any, error) {
	return d.userReason(ctx, r, func(ctx context.Context, t domain.TenantID, u domain.UserID, _ string, meta account.Meta) (account.GovernanceResult, error) {
		return d.h.Accounts.Erase(ctx, t, u, meta)
	})
}

func (d *dispatcher) userResetPassword(ctx context.Context, r run) (any, error) {
	p := r.payload.(*domain.UserResetPasswordPayload)
	if err := required("user_id", p.UserID); err != nil {
		return nil, err
	}
	password, err := d.secrets.reveal(r, "password", p.Password)
	if err != nil {
		return nil, err
	}
	if password == "" {
		return nil, &domain.ValidationError{Field: "password", Reason: "required"}
	}
	res, err := d.h.Accounts.ResetPassword(ctx, r.tenant, p.UserID, password, r.accountMeta())
	if err != nil {
		return nil, err
	}
	return userData(res), nil
}
