package rest

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/commands/verify"
	"github.com/imledger/imledger/domain"
)

// CodeService issues and checks verification codes; *verify.Service implements it. TargetHash is
// the keyed hash a phone number or e-mail address is kept as, which binds it to an account.
type CodeService interface {
	TargetHash(target verify.Target) string
	Create(ctx context.Context, tenant domain.TenantID, scene verify.Scene, target verify.Target) (verify.Issued, error)
	GetActive(ctx context.Context, tenant domain.TenantID, scene verify.Scene, target verify.Target) (verify.Active, error)
	Verify(ctx context.Context, tenant domain.TenantID, scene verify.Scene, target verify.Target, code string) error
	Consume(ctx context.Context, tenant domain.TenantID, scene verify.Scene, target verify.Target, code string) error
}

var _ CodeService = (*verify.Service)(nil)

// CodePolicy says whether a tenant requires a verification code to register or log in
// (the tenant settings register_requires_code, login_requires_code); *access.Gate implements it.
type CodePolicy interface {
	RequiresCode(ctx context.Context, tenant domain.TenantID, scene verify.Scene) bool
}

// CodeTarget names a code's scene and target.
type CodeTarget struct {
	Tenant string `json:"tenant,omitempty" doc:"Tenant id. Required unless X-IM-API-Key names the tenant." example:"demo"`
	Scene  string `json:"scene" enum:"register,login,reset_password,change_phone" doc:"What the code is for; a code never passes for another scene"`
	Phone  string `json:"phone,omitempty" doc:"Phone number (6-20 digits, optional leading +). Give a phone or an email." example:"+8613800138000"`
	Email  string `json:"email,omitempty" doc:"E-mail address. Give a phone or an email."`
}

// CodeCheck is the body of POST /v1/im/verify/codes/verify.
type CodeCheck struct {
	CodeTarget
	Code string `json:"code" doc:"The code received" example:"123456"`
}

// CodeIssued is the data of a code's creation.
type CodeIssued struct {
	CodeID      string `json:"code_id" doc:"The code's id (the code itself only reaches the phone or mailbox)"`
	ExpiresAt   string `json:"expires_at" doc:"When the code stops being valid, UTC RFC 3339"`
	ResendAfter string `json:"resend_after" doc:"No new code for this scene and target before this, UTC RFC 3339"`
	Resent      bool   `json:"resent" doc:"It replaced an active code, which no longer passes"`
}

// CodeStatus is the data of a code status query.
type CodeStatus struct {
	Active       bool   `json:"active" doc:"A code is active for the scene and target"`
	ExpiresAt    string `json:"expires_at,omitempty" doc:"UTC RFC 3339"`
	ResendAfter  string `json:"resend_after,omitempty" doc:"UTC RFC 3339"`
	AttemptsLeft int    `json:"attempts_left,omitempty" doc:"Wrong tries left before the code is locked"`
	Verified     bool   `json:"verified,omitempty" doc:"The code was verified already"`
}

// CodeVerified is the data of a successful verification.
type CodeVerified struct {
	Verified bool `json:"verified"`
}

type codeCreateInput struct {
	APIKeyHeader
	Body CodeTarget
}

type codeCheckInput struct {
	APIKeyHeader
	Body CodeCheck
}

func (a *API) registerVerifyCodes() {
	codeErrs := []int{http.StatusForbidden, http.StatusTooManyRequests}
	huma.Register(a.huma, a.build(op{id: "create-verification-code", method: http.MethodPost, path: "/v1/im/verify/codes",
		summary: "Send a verification code", tag: "verify", status: http.StatusCreated, public: true, errs: codeErrs,
		desc: "Creates a code for the scene and the phone or e-mail and sends it through the configured gateway; an active " +
			"code of the same scene and target is replaced (a resend). 429 rate_limited (details.limit code_resend) within " +
			"the resend window, code_create past 5 codes per hour for one scene and target, or per client address. " +
			"503 retry when Redis is down: codes fail closed."}),
		func(ctx context.Context, in *codeCreateInput) (*reply[CodeIssued], error) {
			if err := a.limit(ctx, rule{"vcode:ip:" + clientIP(ctx), a.cfg.CodePerIP}); err != nil {
				return nil, err
			}
			tenant, scene, target, err := a.codeTarget(ctx, in.Body, in.APIKey)
			if err != nil {
				return nil, err
			}
			iss, err := a.h.Codes.Create(ctx, tenant, scene, target)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", tenant.String())
			}
			return respond(ctx, http.StatusCreated, CodeIssued{CodeID: iss.CodeID, ExpiresAt: rfc3339(iss.ExpiresAt),
				ResendAfter: rfc3339(iss.ResendAt), Resent: iss.Resent}), nil
		})
	huma.Register(a.huma, a.build(op{id: "verification-code-status", method: http.MethodPost, path: "/v1/im/verify/codes/status",
		summary: "Look up the active verification code", tag: "verify", public: true, errs: codeErrs,
		desc: "Whether a code is active for the scene and target, when it expires, when a new one may be sent and how " +
			"many wrong tries are left. Never the code."}),
		func(ctx context.Context, in *codeCreateInput) (*reply[CodeStatus], error) {
			if err := a.limit(ctx, rule{"vcode:ip:" + clientIP(ctx), a.cfg.CodePerIP}); err != nil {
				return nil, err
			}
			tenant, scene, target, err := a.codeTarget(ctx, in.Body, in.APIKey)
			if err != nil {
				return nil, err
			}
			act, err := a.h.Codes.GetActive(ctx, tenant, scene, target)
			if errors.Is(err, domain.ErrNotFound) {
				return respond(ctx, http.StatusOK, CodeStatus{}), nil
			}
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", tenant.String())
			}
			return respond(ctx, http.StatusOK, CodeStatus{Active: true, ExpiresAt: rfc3339(act.ExpiresAt),
				ResendAfter: rfc3339(act.ResendAt), AttemptsLeft: act.AttemptsLeft, Verified: act.Verified}), nil
		})
	huma.Register(a.huma, a.build(op{id: "verify-verification-code", method: http.MethodPost, path: "/v1/im/verify/codes/verify",
		summary: "Check a verification code", tag: "verify", public: true, errs: codeErrs,
		desc: "Checks the code and marks it verified; it stays active until the request that needs it consumes it. " +
			"403 code_invalid (a wrong try, counted), code_locked (too many wrong tries: the code is dead), " +
			"code_not_found, code_used (verified already: of concurrent checks exactly one passes)."}),
		func(ctx context.Context, in *codeCheckInput) (*reply[CodeVerified], error) {
			if err := a.limit(ctx, rule{"vcode:ip:" + clientIP(ctx), a.cfg.CodePerIP}); err != nil {
				return nil, err
			}
			tenant, scene, target, err := a.codeTarget(ctx, in.Body.CodeTarget, in.APIKey)
			if err != nil {
				return nil, err
			}
			if err := a.h.Codes.Verify(ctx, tenant, scene, target, in.Body.Code); err != nil {
				return nil, a.fail(ctx, err, "tenant_id", tenant.String())
			}
			return respond(ctx, http.StatusOK, CodeVerified{Verified: true}), nil
		})
}

// codeTarget validates a code request's tenant (against the registry), scene and target.
func (a *API) codeTarget(ctx context.Context, b CodeTarget, apiKey string) (domain.TenantID, verify.Scene, verify.Target, error) {
	tenant, err := a.publicTenant(ctx, b.Tenant, apiKey)
	if err != nil {
		return domain.TenantID{}, "", verify.Target{}, err
	}
	if a.h.Gate != nil {
		if err := a.h.Gate.CheckTenant(ctx, tenant); err != nil {
			return domain.TenantID{}, "", verify.Target{}, a.fail(ctx, err, "tenant_id", tenant.String())
		}
	}
	scene, err := verify.ParseScene(b.Scene)
	if err != nil {
		return domain.TenantID{}, "", verify.Target{}, a.fail(ctx, err)
	}
	target, err := verify.NewTarget(b.Phone, b.Email)
	if err != nil {
		return domain.TenantID{}, "", verify.Target{}, a.fail(ctx, err)
	}
	return tenant, scene, target, nil
}

// registerCode consumes the register code of a registration: when the tenant requires one
// (requireCode), or when the request gives one and the API binds contacts (Self with Codes). It
// returns the target the consumed code proved, to bind to the new account; the zero Target when
// no code was consumed.
func (a *API) registerCode(ctx context.Context, tenant domain.TenantID, c CodeFields) (verify.Target, error) {
	given := c.Code != "" && (c.Phone != "" || c.Email != "")
	if a.h.Self == nil || a.h.Codes == nil || !given {
		return verify.Target{}, a.requireCode(ctx, tenant, verify.SceneRegister, c.Phone, c.Email, c.Code)
	}
	target, err := verify.NewTarget(c.Phone, c.Email)
	if err != nil {
		return verify.Target{}, a.fail(ctx, err)
	}
	if err := a.h.Codes.Consume(ctx, tenant, verify.SceneRegister, target, c.Code); err != nil {
		return verify.Target{}, a.fail(ctx, err, "tenant_id", tenant.String())
	}
	return target, nil
}

// requireCode consumes the code of scene a register or login request carries when the tenant
// requires one: 403 code_required without one, the code's refusal when it does not pass.
func (a *API) requireCode(ctx context.Context, tenant domain.TenantID, scene verify.Scene, phone, email, code string) error {
	if a.h.CodePolicy == nil || !a.h.CodePolicy.RequiresCode(ctx, tenant, scene) {
		return nil
	}
	if a.h.Codes == nil {
		return a.fail(ctx, domain.Retryable("verification code", errors.New("no code service configured")))
	}
	if code == "" || (phone == "" && email == "") {
		return a.fail(ctx, domain.Deny(verify.ReasonCodeRequired))
	}
	target, err := verify.NewTarget(phone, email)
	if err != nil {
		return a.fail(ctx, err)
	}
	if err := a.h.Codes.Consume(ctx, tenant, scene, target, code); err != nil {
		return a.fail(ctx, err, "tenant_id", tenant.String())
	}
	return nil
}
