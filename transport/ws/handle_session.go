package ws

import (
	"context"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/presence"
)

// maxUALen bounds the user agent kept from hi, in bytes.
const maxUALen = 256

// onHi answers hi. The user agent is free text that goes into the session's events, presence
// and logs, so only a clean part of it is kept (see cleanText).
func (s *session) onHi(f hiFrame) {
	s.ua = cleanText(f.UA, maxUALen)
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
	if !time.Now().Before(p.ExpiresAt) {
		// Within the verifier's clock-skew leeway, yet a session ends when its token expires
		// (tokenExpired): refused as the frames after it would be.
		s.fail(ctx, f.ID, auth.ErrTokenExpired)
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
	s.g.deps.Hub.addUser(s, p.Tenant, p.User, p.IssuedAt, p.Session)
	// A ban, revocation or suspension applied between the check and addUser found no session of
	// this login to end: ask again now that the hub names the session.
	if err := s.gateCheck(ctx, p); err != nil {
		if first {
			s.g.deps.Hub.removeUser(s, p.Tenant, p.User)
		} else {
			s.g.deps.Hub.addUser(s, s.tenant, s.user, s.issued, s.login)
		}
		s.fail(ctx, f.ID, err)
		return
	}
	s.tenant, s.user, s.expires, s.issued, s.login = p.Tenant, p.User, p.ExpiresAt, p.IssuedAt, p.Session
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

// cleanText is s without control characters (NUL included) and invalid UTF-8, cut to at most
// max bytes at a character boundary. Free text a client sends for the gateway to keep goes
// through it: PostgreSQL refuses NUL in text and jsonb, and an invalid or half sequence would
// come back as U+FFFD.
func cleanText(s string, max int) string {
	clean := len(s) <= max
	for i := 0; clean && i < len(s); i++ {
		clean = s[i] >= 0x20 && s[i] < 0x7f
	}
	if clean { // the common case: short printable ASCII, kept as it is
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			continue // an invalid byte decodes as RuneError too
		}
		if b.Len()+utf8.RuneLen(r) > max {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
