package rest

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/domain"
)

// SessionSignedOut is the data of a logout or a sign-out of one session.
type SessionSignedOut struct {
	SessionID string `json:"session_id" doc:"The login session signed out"`
	Unchanged bool   `json:"unchanged" doc:"True when it was signed out before: nothing was written"`
}

// SessionsRevoked is the data of a logout everywhere.
type SessionsRevoked struct {
	RevokedBefore string `json:"revoked_before" doc:"Every token of the user issued before this time (UTC RFC 3339) is refused, on every node"`
}

// LoginSession is one of the caller's active login sessions.
type LoginSession struct {
	SessionID string `json:"session_id" doc:"The session's id, the sid claim of its token"`
	Current   bool   `json:"current" doc:"True for the session of the token that made this request"`
	Device    string `json:"device,omitempty" doc:"The label the client gave its device at login"`
	UserAgent string `json:"user_agent,omitempty" doc:"The client's User-Agent at login"`
	IPHint    string `json:"ip_hint,omitempty" doc:"The network the login came from: an IPv4 /24 or IPv6 /48, never the address"`
	StartedAt string `json:"started_at" doc:"When the session's token was issued, UTC RFC 3339"`
	ExpiresAt string `json:"expires_at" doc:"When its token expires, UTC RFC 3339"`
}

// LoginSessions is the data of the session list.
type LoginSessions struct {
	Sessions []LoginSession `json:"sessions" doc:"Active sessions, most recently started first (at most 200)"`
}

type signOutInput struct {
	IdempotencyHeader
	SessionID string `path:"session_id" maxLength:"64" doc:"The login session to sign out (session_id of the list)"`
}

type logoutInput struct {
	IdempotencyHeader
}

// registerSelfService registers the account self-service endpoints Self serves, with Codes and
// ActionTokens those that need them.
func (a *API) registerSelfService() {
	a.registerLogout()
	a.registerPasswordChange()
	if a.h.Codes != nil {
		a.registerContact()
	}
	if a.h.Codes != nil && a.h.ActionTokens != nil {
		a.registerPasswordReset()
	}
	if a.h.Eraser != nil {
		a.registerAccountDelete()
	}
}

// registerLogout registers the logout, the logout everywhere and the sign-out of one session.
func (a *API) registerLogout() {
	huma.Register(a.huma, a.build(op{id: "logout", method: http.MethodPost, path: "/v1/im/account/logout",
		summary: "Log out this session", tag: "account", errs: []int{http.StatusForbidden},
		desc: "Signs out the login session of the request's token (user.session_ended.v1): every node refuses its token " +
			"from then on (401 session_revoked) and closes its WebSocket connections with reason session_revoked. The " +
			"user's other sessions stay. 403 no_session for a token without a session (log out everywhere instead)."}),
		func(ctx context.Context, _ *logoutInput) (*reply[SessionSignedOut], error) {
			p := principal(ctx)
			if p.Session == "" {
				return nil, a.fail(ctx, domain.Deny(ReasonNoSession))
			}
			return a.signOut(ctx, p, p.Session)
		})
	huma.Register(a.huma, a.build(op{id: "logout-everywhere", method: http.MethodPost, path: "/v1/im/account/logout-everywhere",
		summary: "Log out every session", tag: "account", errs: []int{http.StatusNotFound},
		desc: "Refuses every token of the caller issued before now, this one included (user.tokens_revoked.v1, reason " +
			"logout_everywhere): every node answers them 401 token_revoked and closes their WebSocket connections with " +
			"reason token_revoked. Log in again for a new session. 404 not_found for a token of a user without an account."}),
		func(ctx context.Context, _ *logoutInput) (*reply[SessionsRevoked], error) {
			p := principal(ctx)
			res, err := a.h.Self.RevokeTokens(ctx, p.Tenant, p.User, reasonLogoutEverywhere, selfMeta(ctx, p.User))
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			return respond(ctx, http.StatusOK, SessionsRevoked{RevokedBefore: rfc3339(res.Status.NotBefore)}), nil
		})
	huma.Register(a.huma, a.build(op{id: "sign-out-session", method: http.MethodDelete, path: "/v1/im/account/sessions/{session_id}",
		summary: "Sign out one session", tag: "account", errs: []int{http.StatusForbidden},
		desc: "Signs out one of the caller's login sessions, a lost device's say (user.session_ended.v1, reason signed_out, " +
			"by the caller's session): every node refuses its token from then on and closes its WebSocket connections " +
			"within a second with reason session_revoked. The current session may be named too (a logout). 403 " +
			"session_not_found for a session the caller never had; unchanged: true for one signed out before."}),
		func(ctx context.Context, in *signOutInput) (*reply[SessionSignedOut], error) {
			return a.signOut(ctx, principal(ctx), in.SessionID)
		})
}

// signOut ends login session id of p, by p's own session.
func (a *API) signOut(ctx context.Context, p Principal, id string) (*reply[SessionSignedOut], error) {
	res, err := a.h.Self.EndSession(ctx, account.EndSession{Tenant: p.Tenant, User: p.User, SessionID: id, By: p.Session,
		TraceID: RequestID(ctx)})
	if err != nil {
		return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	return respond(ctx, http.StatusOK, SessionSignedOut{SessionID: id, Unchanged: res.Unchanged}), nil
}

// registerSessionList registers the list of the caller's login sessions.
func (a *API) registerSessionList() {
	huma.Register(a.huma, a.build(op{id: "list-sessions", method: http.MethodGet, path: "/v1/im/account/sessions",
		summary: "List my sessions and devices", tag: "account",
		desc: "The caller's active login sessions from the read model, most recently started first: not signed out, " +
			"not expired, not ended by a revocation or a password change. current marks the session of the request's " +
			"token. A login shows here once its event has been projected."}),
		func(ctx context.Context, _ *struct{}) (*reply[LoginSessions], error) {
			p := principal(ctx)
			list, err := a.h.SessionList.ActiveSessions(ctx, p.Tenant, p.User, time.Now())
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			out := LoginSessions{Sessions: make([]LoginSession, 0, len(list))}
			for _, s := range list {
				out.Sessions = append(out.Sessions, LoginSession{SessionID: s.SessionID, Current: s.SessionID == p.Session && p.Session != "",
					Device: s.Device, UserAgent: s.UserAgent, IPHint: s.IPHint, StartedAt: rfc3339(s.StartedAt), ExpiresAt: rfc3339(s.ExpiresAt)})
			}
			return respond(ctx, http.StatusOK, out), nil
		})
}
