package rest

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/actiontoken"
	"github.com/imledger/imledger/commands/verify"
	"github.com/imledger/imledger/domain"
)

// ChangePasswordRequest is the body of PUT /v1/im/account/password.
type ChangePasswordRequest struct {
	OldPassword string `json:"old_password" doc:"The current password"`
	NewPassword string `json:"new_password" doc:"The new password, at least 8 bytes of text"`
}

// PasswordChanged is the data of a password change.
type PasswordChanged struct {
	RevokedBefore string `json:"revoked_before" doc:"Every token of the caller issued before this time is refused (UTC RFC 3339), but those of the kept session"`
	KeptSession   string `json:"kept_session,omitempty" doc:"The session that stays signed in: the request's own. Absent for a token without a session, which is refused too"`
}

// ResetTokenRequest is the body of POST /v1/im/auth/password-reset/token.
type ResetTokenRequest struct {
	Tenant string `json:"tenant,omitempty" doc:"Tenant id. Required unless X-IM-API-Key names the tenant." example:"demo"`
	Login  string `json:"login" doc:"The login name of the account to reset" example:"alice"`
	Phone  string `json:"phone,omitempty" doc:"The phone number bound to the account, which the code was sent to. Give a phone or an email."`
	Email  string `json:"email,omitempty" doc:"The e-mail address bound to the account, which the code was sent to."`
	Code   string `json:"code" doc:"A code of scene reset_password sent to it (POST /v1/im/verify/codes)" example:"123456"`
}

// ResetToken is the data of a verified reset: the one-time token the reset spends.
type ResetToken struct {
	Token     string `json:"token" doc:"A reset_password action token, shown once; only its hash is stored"`
	ExpiresAt string `json:"expires_at" doc:"UTC RFC 3339 (http.reset_token_ttl after now)"`
}

// ResetPasswordRequest is the body of POST /v1/im/auth/password-reset.
type ResetPasswordRequest struct {
	Tenant      string `json:"tenant,omitempty" doc:"Tenant id. Required unless X-IM-API-Key names the tenant." example:"demo"`
	Token       string `json:"token" doc:"The token of POST /v1/im/auth/password-reset/token"`
	NewPassword string `json:"new_password" doc:"The new password, at least 8 bytes of text"`
}

// PasswordReset is the data of a password reset.
type PasswordReset struct {
	UserID        string `json:"user_id" doc:"The account reset (64-bit, as a string)"`
	RevokedBefore string `json:"revoked_before" doc:"Every token of the account issued before this time is refused (UTC RFC 3339): log in with the new password"`
}

type changePasswordInput struct {
	Body ChangePasswordRequest
}

type resetTokenInput struct {
	APIKeyHeader
	Body ResetTokenRequest
}

type resetPasswordInput struct {
	APIKeyHeader
	Body ResetPasswordRequest
}

// registerPasswordChange registers the password change of a logged-in user.
func (a *API) registerPasswordChange() {
	huma.Register(a.huma, a.build(op{id: "change-password", method: http.MethodPut, path: "/v1/im/account/password",
		summary: "Change my password", tag: "account", secret: true,
		errs: []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusTooManyRequests},
		desc: "Checks the old password, sets the new one and records user.password_changed.v1: every other session of " +
			"the caller is signed out on every node (401 token_revoked, WebSocket connections closed with token_revoked), " +
			"this one stays. 403 wrong_password; 400 invalid for a new password registration would refuse (nothing is " +
			"changed either way). Limited per user (http.account_per_user, right or wrong). The body holds passwords, so " +
			"it takes no Idempotency-Key; repeating a change that succeeded (a retry after a lost answer) succeeds again " +
			"and signs the other sessions out again."}),
		func(ctx context.Context, in *changePasswordInput) (*reply[PasswordChanged], error) {
			p := principal(ctx)
			if err := a.limitAccount(ctx, p); err != nil {
				return nil, err
			}
			res, err := a.h.Self.ChangePassword(ctx, account.ChangePassword{Tenant: p.Tenant, User: p.User,
				Old: in.Body.OldPassword, New: in.Body.NewPassword, Session: p.Session, TraceID: RequestID(ctx)})
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			return respond(ctx, http.StatusOK, PasswordChanged{RevokedBefore: rfc3339(res.Status.NotBefore), KeptSession: res.Status.KeptSession}), nil
		})
}

// limitAccount applies the per-user limit of the requests that check a password again.
func (a *API) limitAccount(ctx context.Context, p Principal) error {
	return a.limit(ctx, rule{"account:user:" + p.Tenant.String() + ":" + p.User.String(), a.cfg.AccountPerUser})
}

// registerPasswordReset registers the public password reset: a verified code for a reset token,
// and the reset that spends it.
func (a *API) registerPasswordReset() {
	huma.Register(a.huma, a.build(op{id: "password-reset-token", method: http.MethodPost, path: "/v1/im/auth/password-reset/token",
		summary: "Verify a password reset", tag: "auth", status: http.StatusCreated, public: true,
		errs: []int{http.StatusForbidden, http.StatusTooManyRequests},
		desc: "Consumes a verification code of scene reset_password sent to the phone or e-mail bound to the account " +
			"(PUT /v1/im/account/contact, or given with a code at registration) and answers a one-time reset_password " +
			"token for it. 403 contact_mismatch when the login has no account with that contact bound (an unknown login " +
			"alike; the code is spent either way), code_invalid, code_not_found, code_locked. Limited per client address " +
			"(http.reset_per_ip) and per login name (http.reset_per_login)."}),
		func(ctx context.Context, in *resetTokenInput) (*reply[ResetToken], error) {
			name := strings.ToLower(in.Body.Login)
			if len(name) > 64 {
				name = name[:64]
			}
			tenant, err := a.resetTenant(ctx, in.Body.Tenant, in.APIKey)
			if err != nil {
				return nil, err
			}
			if err := a.limit(ctx, rule{"reset:login:" + tenant.String() + ":" + name, a.cfg.ResetPerLogin}); err != nil {
				return nil, err
			}
			target, err := verify.NewTarget(in.Body.Phone, in.Body.Email)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			if err := a.h.Codes.Consume(ctx, tenant, verify.SceneResetPassword, target, in.Body.Code); err != nil {
				return nil, a.fail(ctx, err, "tenant_id", tenant.String())
			}
			uid, err := a.h.Self.ResetSubject(ctx, tenant, in.Body.Login, string(target.Channel()), a.h.Codes.TargetHash(target))
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", tenant.String())
			}
			iss, err := a.h.ActionTokens.Issue(ctx, actiontoken.Issue{Tenant: tenant, Action: actiontoken.ActionResetPassword,
				Subject: uid.String(), TTL: a.cfg.ResetTokenTTL})
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", tenant.String())
			}
			return respond(ctx, http.StatusCreated, ResetToken{Token: iss.Token, ExpiresAt: rfc3339(iss.ExpiresAt)}), nil
		})
	a.registerResetWithToken()
}

// registerResetWithToken registers the reset that spends a reset token.
func (a *API) registerResetWithToken() {
	huma.Register(a.huma, a.build(op{id: "password-reset", method: http.MethodPost, path: "/v1/im/auth/password-reset",
		summary: "Reset a password", tag: "auth", public: true, errs: []int{http.StatusForbidden, http.StatusTooManyRequests},
		desc: "Spends a reset_password token and sets the account's new password (user.password_reset.v1): every token of " +
			"the account is refused on every node and its WebSocket connections are closed with token_revoked. 400 " +
			"invalid for a new password registration would refuse, before the token is spent; 403 action_token_invalid, " +
			"action_token_used (spent already: a token resets once), action_token_expired. Limited per client address " +
			"(http.reset_per_ip)."}),
		func(ctx context.Context, in *resetPasswordInput) (*reply[PasswordReset], error) {
			tenant, err := a.resetTenant(ctx, in.Body.Tenant, in.APIKey)
			if err != nil {
				return nil, err
			}
			if err := a.h.Self.CheckNewPassword(in.Body.NewPassword); err != nil {
				return nil, a.fail(ctx, err)
			}
			var uid domain.UserID
			spent, err := a.h.ActionTokens.ConsumeIf(ctx, tenant, in.Body.Token, actiontoken.ActionResetPassword, 0,
				func(c actiontoken.Consumed) error {
					u, err := domain.ParseUserID(c.Subject)
					if err != nil {
						return domain.Deny(actiontoken.ReasonTokenInvalid)
					}
					uid = u
					return nil
				})
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", tenant.String())
			}
			res, err := a.h.Self.ResetPassword(ctx, tenant, uid, in.Body.NewPassword, selfMeta(ctx, uid))
			if err != nil {
				a.giveBack(ctx, tenant, spent.TokenID)
				return nil, a.fail(ctx, err, "tenant_id", tenant.String())
			}
			return respond(ctx, http.StatusOK, PasswordReset{UserID: uid.String(), RevokedBefore: rfc3339(res.Status.NotBefore)}), nil
		})
}

// resetTenant is the tenant of a reset request, checked against the registry, after the
// per-address limit.
func (a *API) resetTenant(ctx context.Context, named, apiKey string) (domain.TenantID, error) {
	if err := a.limit(ctx, rule{"reset:ip:" + clientIP(ctx), a.cfg.ResetPerIP}); err != nil {
		return domain.TenantID{}, err
	}
	tenant, err := a.publicTenant(ctx, named, apiKey)
	if err != nil {
		return domain.TenantID{}, err
	}
	if a.h.Gate != nil {
		if err := a.h.Gate.CheckTenant(ctx, tenant); err != nil {
			return domain.TenantID{}, a.fail(ctx, err, "tenant_id", tenant.String())
		}
	}
	return tenant, nil
}

// giveBack makes a spent reset token active again after the reset it paid for failed, so the
// user can try again with it. A failure is logged: the user asks for a new code then.
func (a *API) giveBack(ctx context.Context, tenant domain.TenantID, tokenID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unconsumeTimeout)
	defer cancel()
	if err := a.h.ActionTokens.Unconsume(ctx, tenant, tokenID, 0); err != nil && !errors.Is(err, domain.ErrNotFound) {
		a.cfg.Logger.WarnContext(ctx, "a reset token whose reset failed stays spent", "tenant_id", tenant.String(),
			"request_id", RequestID(ctx), "err", err)
	}
}
