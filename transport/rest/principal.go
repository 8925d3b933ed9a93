package rest

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/auth"
)

// Request headers of authentication.
const (
	HeaderAuthorization = "Authorization" // "Bearer <token>"
	HeaderAPIKey        = "X-IM-API-Key"  // tenant API key (seed 004 §6.2)
	// HeaderTenant and HeaderUser are development-only principal headers, believed only with
	// Config.DevAuth and only when no Authorization header is sent. Outside DevAuth, a request
	// that sends X-IM-Tenant must name its token's tenant (401 token_invalid otherwise).
	HeaderTenant = "X-IM-Tenant"
	HeaderUser   = "X-IM-User"
)

// TokenService verifies bearer tokens and issues them at login; *auth.Signer implements it.
// Verify errors wrap auth.ErrTokenInvalid or auth.ErrTokenExpired.
// IssueFrom stamps a login's token with the time the login began; IssueSession also names the
// login session the login started.
type TokenService interface {
	Verify(token string) (auth.Principal, error)
	Issue(tenant domain.TenantID, user domain.UserID, ttl time.Duration) (string, error)
	IssueFrom(tenant domain.TenantID, user domain.UserID, from time.Time, ttl time.Duration) (string, error)
	IssueSession(tenant domain.TenantID, user domain.UserID, session string, from time.Time, ttl time.Duration) (string, error)
}

var _ TokenService = (*auth.Signer)(nil)

// APIKeyVerifier returns the tenant of a tenant API key; *account.Service implements it.
// Errors: account.ErrInvalidAPIKey, or a retryable error when the key store is down.
type APIKeyVerifier interface {
	VerifyAPIKey(ctx context.Context, key string) (domain.TenantID, error)
}

// Principal is who makes a request.
type Principal struct {
	Tenant domain.TenantID
	User   domain.UserID
	// Session is the login session of the request's token; "" for a token without one and
	// under DevAuth.
	Session string
}

func (p Principal) domain() domain.Principal { return domain.Principal{Tenant: p.Tenant, User: p.User} }

type principalKey struct{}

// PrincipalFrom returns the authenticated principal of a request's context; ok is false on
// public endpoints and outside a request.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// principal returns the request's principal; authenticate put it there before any handler of an
// authenticated operation runs.
func principal(ctx context.Context) Principal {
	p, _ := PrincipalFrom(ctx)
	return p
}

// authenticate is huma middleware: every operation that is not public needs a principal, from
// the bearer token (and the tenant API key when required or given), or from the development
// headers under Config.DevAuth. Failures are answered 401 here; the handler never runs. Then
// the request limits apply (per user, per API key): over one it is answered 429 rate_limited.
func (a *API) authenticate(ctx huma.Context, next func(huma.Context)) {
	if isPublic(ctx.Operation()) {
		if err := a.limitRequest(ctx, nil); err != nil {
			writeError(ctx, MapError(ctx.Context(), a.fail(ctx.Context(), err)))
			return
		}
		next(ctx)
		return
	}
	p, err := a.principalOf(ctx)
	if err != nil {
		writeError(ctx, MapError(ctx.Context(), err))
		return
	}
	if err := a.limitRequest(ctx, &p); err != nil {
		writeError(ctx, MapError(ctx.Context(), a.fail(ctx.Context(), err)))
		return
	}
	next(huma.WithValue(ctx, principalKey{}, p))
}

func (a *API) principalOf(ctx huma.Context) (Principal, error) {
	c := ctx.Context()
	header := ctx.Header(HeaderAuthorization)
	if header == "" && a.cfg.DevAuth {
		p, err := devPrincipal(c, ctx.Header(HeaderTenant), ctx.Header(HeaderUser))
		if err == nil && a.h.Gate != nil {
			err = a.h.Gate.Admit(c, auth.Principal{Tenant: p.Tenant, User: p.User})
		}
		return p, err
	}
	if header == "" {
		return Principal{}, unauthorized(RequestID(c), ReasonUnauthenticated, "missing bearer token",
			map[string]any{"header": HeaderAuthorization, "reason": "required"})
	}
	scheme, token, found := strings.Cut(header, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") || a.h.Tokens == nil {
		return Principal{}, unauthorized(RequestID(c), ReasonTokenInvalid, "expected Authorization: Bearer <token>",
			map[string]any{"header": HeaderAuthorization, "reason": "bad_format"})
	}
	ap, err := a.h.Tokens.Verify(strings.TrimSpace(token))
	if err != nil {
		return Principal{}, err
	}
	if a.h.Gate != nil {
		if err := a.h.Gate.Admit(c, ap); err != nil {
			return Principal{}, err
		}
	}
	p := Principal{Tenant: ap.Tenant, User: ap.User, Session: ap.Session}
	if t := ctx.Header(HeaderTenant); t != "" && t != p.Tenant.String() {
		return Principal{}, unauthorized(RequestID(c), ReasonTokenInvalid, "the token belongs to another tenant", nil)
	}
	if err := a.checkAPIKey(c, ctx.Header(HeaderAPIKey), p.Tenant); err != nil {
		return Principal{}, err
	}
	return p, nil
}

// checkAPIKey checks the tenant API key against tenant: required with Config.RequireAPIKey,
// checked whenever one is sent. A key of another tenant is 401 token_invalid.
func (a *API) checkAPIKey(ctx context.Context, key string, tenant domain.TenantID) error {
	t, ok, err := a.apiKeyTenant(ctx, key)
	if err != nil || !ok {
		return err
	}
	if t != tenant {
		return unauthorized(RequestID(ctx), ReasonTokenInvalid, "the token and the API key belong to different tenants", nil)
	}
	return nil
}

// apiKeyTenant verifies key; ok is false when no key was sent and none is required.
func (a *API) apiKeyTenant(ctx context.Context, key string) (domain.TenantID, bool, error) {
	if key == "" {
		if a.cfg.RequireAPIKey {
			return domain.TenantID{}, false, unauthorized(RequestID(ctx), ReasonUnauthenticated, "missing tenant API key",
				map[string]any{"header": HeaderAPIKey, "reason": "required"})
		}
		return domain.TenantID{}, false, nil
	}
	if a.h.APIKeys == nil {
		return domain.TenantID{}, false, unauthorized(RequestID(ctx), ReasonAPIKeyInvalid, "API keys are not enabled",
			map[string]any{"header": HeaderAPIKey})
	}
	t, err := a.h.APIKeys.VerifyAPIKey(ctx, key)
	if err != nil {
		return domain.TenantID{}, false, err
	}
	return t, true, nil
}

// devPrincipal reads the development-only principal headers. A missing or malformed header is
// 401 unauthenticated with details {header, reason}.
func devPrincipal(ctx context.Context, tenant, user string) (Principal, error) {
	t, err := domain.NewTenantID(tenant)
	if err != nil {
		return Principal{}, badDevHeader(ctx, HeaderTenant, err)
	}
	u, err := domain.ParseUserID(user)
	if err != nil {
		return Principal{}, badDevHeader(ctx, HeaderUser, err)
	}
	return Principal{Tenant: t, User: u}, nil
}

func badDevHeader(ctx context.Context, header string, err error) error {
	reason := "bad_format"
	if ve, ok := err.(*domain.ValidationError); ok {
		reason = ve.Reason
	}
	return unauthorized(RequestID(ctx), ReasonUnauthenticated, "missing or invalid principal header "+header,
		map[string]any{"header": header, "reason": reason})
}

// writeError writes e as the answer from a middleware.
func writeError(ctx huma.Context, e *Error) {
	for k, vs := range e.headers {
		for _, v := range vs {
			ctx.AppendHeader(k, v)
		}
	}
	writeJSON(ctx, e.status, e)
}

func writeJSON(ctx huma.Context, status int, v any) {
	ctx.SetHeader("Content-Type", "application/json")
	ctx.SetStatus(status)
	if err := huma.DefaultJSONFormat.Marshal(ctx.BodyWriter(), v); err != nil {
		ctx.SetStatus(http.StatusInternalServerError)
	}
}
