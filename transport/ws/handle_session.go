package ws

import (
	"context"
	"net/http"

	"github.com/imledger/imledger/transport/presence"
)

// maxUALen bounds the user agent kept from hi.
const maxUALen = 256

func (s *session) onHi(f hiFrame) {
	s.ua = f.UA
	if len(s.ua) > maxUALen {
		s.ua = s.ua[:maxUALen]
	}
	s.sendCtrl(ctrl{ID: f.ID, Code: http.StatusCreated, Text: "created", Params: map[string]any{
		"ver": ProtocolVersion, "sid": s.id, "max_frame_size": s.g.cfg.MaxFrameSize,
		"idle_timeout_s": int(s.g.cfg.IdleTimeout.Seconds()),
	}})
}

// onLogin authenticates the session. A logged-in session may log in again with a fresh token of
// the same user (to extend an expiring session), never as someone else.
func (s *session) onLogin(ctx context.Context, f loginFrame) {
	p, err := s.g.deps.Tokens.Verify(f.Token)
	if err != nil {
		s.fail(ctx, f.ID, err)
		return
	}
	if s.user != 0 && (p.User != s.user || p.Tenant != s.tenant) {
		s.refuse(errCtrl(f.ID, http.StatusConflict, ReasonAlreadyAuthenticated, "already logged in as another user"))
		return
	}
	if err := s.gateCheck(ctx, p); err != nil {
		s.fail(ctx, f.ID, err)
		return
	}
	first := s.user == 0
	s.tenant, s.user, s.expires, s.issued = p.Tenant, p.User, p.ExpiresAt, p.IssuedAt
	s.g.deps.Hub.addUser(s, p.Tenant, p.User, p.IssuedAt)
	if first && s.g.deps.Sessions != nil {
		if err := s.g.deps.Sessions.Opened(ctx, p.Tenant, p.User, s.id, s.ua); err != nil {
			s.g.log.WarnContext(ctx, "ws: session event not recorded", "tenant_id", p.Tenant.String(), "err", err)
		}
	}
	if first && s.g.deps.Presence != nil {
		var err error
		s.pres, err = s.g.deps.Presence.Login(ctx, presence.LoginInfo{Tenant: p.Tenant, User: p.User, SessionID: s.id, UA: s.ua})
		if err != nil {
			s.g.log.WarnContext(ctx, "ws: presence login failed; the next frame retries", "tenant_id", p.Tenant.String(), "err", err)
		}
	}
	s.sendCtrl(ctrl{ID: f.ID, Code: http.StatusOK, Text: "ok", Params: map[string]any{
		"tenant": p.Tenant.String(), "user": p.User.String(), "expires": timestamp(p.ExpiresAt),
	}})
}
