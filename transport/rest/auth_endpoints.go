package rest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/verify"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/auth"
)

// AccountService registers users and checks logins; *account.Service implements it.
// CheckRegister validates a registration without writing or hashing anything.
type AccountService interface {
	CheckRegister(cmd account.Register) error
	Register(ctx context.Context, cmd account.Register) (account.Registered, error)
	Login(ctx context.Context, tenant domain.TenantID, login, password string) (domain.UserID, error)
}

var _ AccountService = (*account.Service)(nil)

// RegisterRequest is the body of POST /v1/im/auth/register.
type RegisterRequest struct {
	Tenant    string `json:"tenant,omitempty" doc:"Tenant id. Required unless X-IM-API-Key names the tenant; must match the key's tenant when both are sent." example:"demo"`
	Login     string `json:"login" doc:"Login name, 3-32 of [a-z0-9_.-]; upper-case letters are folded to lower case" example:"alice"`
	Password  string `json:"password" doc:"Password, at least 8 bytes" example:"correct horse battery staple"`
	Nickname  string `json:"nickname,omitempty" doc:"Public nickname; the login name when empty" example:"Alice"`
	Avatar    string `json:"avatar,omitempty" doc:"Avatar URL"`
	Signature string `json:"signature,omitempty" doc:"Status signature"`
	CodeFields
}

// CodeFields carry the verification code of a register or login request, required when the
// tenant's register_requires_code or login_requires_code setting is on.
type CodeFields struct {
	Phone string `json:"phone,omitempty" doc:"Phone number the code was sent to (when the tenant requires a code)"`
	Email string `json:"email,omitempty" doc:"E-mail address the code was sent to (when the tenant requires a code)"`
	Code  string `json:"code,omitempty" doc:"Verification code of the scene register or login; 403 code_required when the tenant requires one and none is given"`
}

// RegisteredUser is the data of a registration's answer.
type RegisteredUser struct {
	UserID       string `json:"user_id" doc:"The new user's id (64-bit, as a string)" example:"7231001234567890"`
	Login        string `json:"login" doc:"The login name as stored (lower case)" example:"alice"`
	RegisteredAt string `json:"registered_at" doc:"UTC RFC 3339"`
}

// LoginRequest is the body of POST /v1/im/auth/login.
type LoginRequest struct {
	Tenant   string `json:"tenant,omitempty" doc:"Tenant id. Required unless X-IM-API-Key names the tenant." example:"demo"`
	Login    string `json:"login" doc:"Login name" example:"alice"`
	Password string `json:"password" doc:"Password" example:"correct horse battery staple"`
	Device   string `json:"device,omitempty" doc:"A label for this device, at most 64 characters on one line, shown in the session list" example:"Alice's phone"`
	CodeFields
}

// LoginResult is the data of a login's answer.
type LoginResult struct {
	Token     string `json:"token" doc:"Access token for Authorization: Bearer <token>"`
	ExpiresAt string `json:"expires_at" doc:"When the token expires, UTC RFC 3339"`
	UserID    string `json:"user_id" doc:"The user's id (64-bit, as a string)"`
	SessionID string `json:"session_id,omitempty" doc:"The login session the token belongs to (its sid claim); sign it out with DELETE /v1/im/account/sessions/{session_id}"`
}

// APIKeyHeader is the optional tenant API key header of the public endpoints.
type APIKeyHeader struct {
	APIKey string `header:"X-IM-API-Key" doc:"Tenant API key; required when the server requires API keys"`
}

type registerInput struct {
	APIKeyHeader
	Body RegisterRequest
}

type loginInput struct {
	APIKeyHeader
	UserAgent string `header:"User-Agent" doc:"Kept, cleaned and cut to 256 characters, in the login session's record"`
	Body      LoginRequest
}

// registerAuth registers the public registration and login.
func (a *API) registerAuth() {
	huma.Register(a.huma, a.build(op{id: "register", method: http.MethodPost, path: "/v1/im/auth/register",
		summary: "Register a user", tag: "auth", status: http.StatusCreated, public: true,
		desc: "Creates an account: the login name and password hash are stored, user.registered.v1 and the first " +
			"profile are appended to the user's stream. Rate limited per client address; 403 login_taken when the " +
			"name is taken. When the tenant sets register_requires_code, phone or email and a code of scene register " +
			"are consumed first (403 code_required, code_invalid, code_not_found, code_locked). With the account " +
			"self-service on, a phone or email given with a code of scene register is consumed whether the tenant " +
			"requires it or not, and bound to the new account for password resets.",
		errs: []int{http.StatusForbidden, http.StatusConflict, http.StatusTooManyRequests}, reasons: []string{domain.ReasonRegistrationClosed}}),
		a.signUp)
	huma.Register(a.huma, a.build(op{id: "login", method: http.MethodPost, path: "/v1/im/auth/login",
		summary: "Log in", tag: "auth", public: true,
		desc: "Checks the login name and password and issues an access token. 401 invalid_credentials for an unknown " +
			"login and a wrong password alike. Rate limited per client address, per login name and client address, and " +
			"per login name from addresses that have not logged in to it recently (429 rate_limited). When the tenant sets " +
			"login_requires_code, a code of scene login is consumed after the password passed (403 code_required, ...). " +
			"With the account self-service on, the token belongs to a new login session (session_id, the token's sid " +
			"claim), recorded as user.session_started.v1 with the device label, the User-Agent and the client's network " +
			"(IPv4 /24, IPv6 /48), listed by GET /v1/im/account/sessions.",
		errs: []int{http.StatusForbidden, http.StatusTooManyRequests}, reasons: []string{ReasonInvalidCredentials}}),
		a.login)
}

// signUp registers a user: the tenant checks, the registration code and the binding of a contact
// proven by it.
func (a *API) signUp(ctx context.Context, in *registerInput) (*reply[RegisteredUser], error) {
	if err := a.limit(ctx, rule{"register:ip:" + clientIP(ctx), a.cfg.RegisterPerIP}); err != nil {
		return nil, err
	}
	tenant, err := a.publicTenant(ctx, in.Body.Tenant, in.APIKey)
	if err != nil {
		return nil, err
	}
	if a.h.Gate != nil {
		if err := a.h.Gate.CanRegister(ctx, tenant); err != nil {
			return nil, a.fail(ctx, err, "tenant_id", tenant.String())
		}
	}
	cmd := account.Register{Tenant: tenant, Login: in.Body.Login, Password: in.Body.Password,
		Nickname: in.Body.Nickname, Avatar: in.Body.Avatar, Signature: in.Body.Signature, TraceID: RequestID(ctx)}
	// Bad input is refused before the code is consumed, so it can be sent again corrected.
	if err := a.h.Accounts.CheckRegister(cmd); err != nil {
		return nil, a.fail(ctx, err, "tenant_id", tenant.String())
	}
	proven, err := a.registerCode(ctx, tenant, in.Body.CodeFields)
	if err != nil {
		return nil, err
	}
	res, err := a.h.Accounts.Register(ctx, cmd)
	if err != nil {
		return nil, a.fail(ctx, err, "tenant_id", tenant.String())
	}
	if !proven.IsZero() {
		// The account exists whatever happens to the binding: a failure is logged, and
		// the user binds the contact again from the account.
		if err := a.bindContact(ctx, Principal{Tenant: tenant, User: res.User}, proven); err != nil {
			a.cfg.Logger.WarnContext(ctx, "the verified contact of a registration was not bound", "tenant_id", tenant.String(),
				"request_id", RequestID(ctx), "err", err)
		}
	}
	return respond(ctx, http.StatusCreated, RegisteredUser{UserID: res.User.String(), Login: res.Login.String(),
		RegisteredAt: rfc3339(res.RegisteredAt)}), nil
}

// login checks a login's password and tenant rules and issues its token.
func (a *API) login(ctx context.Context, in *loginInput) (*reply[LoginResult], error) {
	name := strings.ToLower(in.Body.Login)
	if len(name) > 64 {
		name = name[:64]
	}
	tenant, err := a.publicTenant(ctx, in.Body.Tenant, in.APIKey)
	if err != nil {
		return nil, err
	}
	if a.h.Gate != nil {
		if err := a.h.Gate.CheckTenant(ctx, tenant); err != nil {
			return nil, a.fail(ctx, err, "tenant_id", tenant.String())
		}
	}
	if err := a.limitLogin(ctx, tenant, name); err != nil {
		return nil, err
	}
	if a.h.Self != nil {
		if err := checkDevice(in.Body.Device); err != nil {
			return nil, a.fail(ctx, err)
		}
	}
	// The token is issued as of now, before the password hash is read: a password reset
	// or revocation landing while the password is checked revokes it.
	begun := time.Now()
	uid, err := a.h.Accounts.Login(ctx, tenant, in.Body.Login, in.Body.Password)
	if err != nil {
		return nil, a.fail(ctx, err, "tenant_id", tenant.String())
	}
	if a.h.Gate != nil {
		// A login is checked for the ban only: the token it issues is new.
		if err := a.h.Gate.Admit(ctx, auth.Principal{Tenant: tenant, User: uid}); err != nil {
			return nil, a.fail(ctx, err, "tenant_id", tenant.String())
		}
	}
	if err := a.requireCode(ctx, tenant, verify.SceneLogin, in.Body.Phone, in.Body.Email, in.Body.Code); err != nil {
		return nil, err
	}
	a.rememberAddress(ctx, tenant, name)
	token, p, err := a.issueLoginToken(tenant, uid, begun)
	if err != nil {
		return nil, a.fail(ctx, err, "tenant_id", tenant.String())
	}
	if a.h.Gate != nil {
		// A ban or a password reset that this node heard of while the login ran: the
		// password checked may no longer be the user's.
		if err := a.h.Gate.Admit(ctx, p); errors.Is(err, account.ErrTokenRevoked) {
			return nil, a.fail(ctx, account.ErrInvalidCredentials, "tenant_id", tenant.String())
		} else if err != nil {
			return nil, a.fail(ctx, err, "tenant_id", tenant.String())
		}
	}
	if err := a.startSession(ctx, p, in.Body.Device, in.UserAgent); err != nil {
		return nil, err
	}
	return respond(ctx, http.StatusOK, LoginResult{Token: token, ExpiresAt: rfc3339(p.ExpiresAt), UserID: uid.String(),
		SessionID: p.Session}), nil
}

// issueLoginToken issues the token of a login begun at begun and verifies it back: with Self, a
// token of a new login session; without, a token without one.
func (a *API) issueLoginToken(tenant domain.TenantID, uid domain.UserID, begun time.Time) (string, auth.Principal, error) {
	var (
		token string
		err   error
	)
	if a.h.Self == nil {
		token, err = a.h.Tokens.IssueFrom(tenant, uid, begun, a.cfg.TokenTTL)
	} else {
		var sid string
		if sid, err = newSessionID(); err == nil {
			token, err = a.h.Tokens.IssueSession(tenant, uid, sid, begun, a.cfg.TokenTTL)
		}
	}
	if err != nil {
		return "", auth.Principal{}, err
	}
	p, err := a.h.Tokens.Verify(token)
	return token, p, err
}

// startSession records the login session of a login's token p (nothing without Self or for a
// token without one). A failure fails the login: its token is never shown.
func (a *API) startSession(ctx context.Context, p auth.Principal, device, userAgent string) error {
	if a.h.Self == nil || p.Session == "" {
		return nil
	}
	err := a.h.Self.StartSession(ctx, account.StartSession{Tenant: p.Tenant, User: p.User, SessionID: p.Session, Device: device,
		UserAgent: cleanUserAgent(userAgent), IPHint: ipHint(clientIP(ctx)), StartedAt: p.IssuedAt, ExpiresAt: p.ExpiresAt,
		TraceID: RequestID(ctx)})
	if err != nil {
		return a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	return nil
}

// publicTenant is the tenant of a register or login request: the API key's when one is sent
// (required with Config.RequireAPIKey), else the body's.
func (a *API) publicTenant(ctx context.Context, named, key string) (domain.TenantID, error) {
	fromKey, ok, err := a.apiKeyTenant(ctx, key)
	if err != nil {
		return domain.TenantID{}, a.fail(ctx, err)
	}
	if ok {
		if named != "" && named != fromKey.String() {
			return domain.TenantID{}, unauthorized(RequestID(ctx), ReasonAPIKeyInvalid, "the API key belongs to another tenant",
				map[string]any{"header": HeaderAPIKey})
		}
		return fromKey, nil
	}
	t, err := domain.NewTenantID(named)
	if err != nil {
		if ve, isVE := err.(*domain.ValidationError); isVE {
			ve.Field = "tenant"
		}
		return domain.TenantID{}, a.fail(ctx, err)
	}
	return t, nil
}

type remoteAddrKey struct{}

// withRemoteAddr is huma middleware that keeps the client address in the context for the rate
// limits of the public endpoints.
func withRemoteAddr(ctx huma.Context, next func(huma.Context)) {
	next(huma.WithValue(ctx, remoteAddrKey{}, ctx.RemoteAddr()))
}

// clientIP is the request's peer address without the port. Behind a proxy it is the proxy's:
// put the limits in the proxy then, or terminate clients directly.
func clientIP(ctx context.Context) string {
	addr, _ := ctx.Value(remoteAddrKey{}).(string)
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
