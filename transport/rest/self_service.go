package rest

import (
	"context"
	"net"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/login"
)

// SelfService is what a user does to their own account; *account.SelfService implements it.
// StartSession and EndSession start and end login sessions; ChangePassword, RevokeTokens,
// ResetPassword and BindContact append to the account stream; CheckPassword, CheckNewPassword and
// ResetSubject read the credentials. Refusals are *domain.DeniedError (wrong_password,
// session_not_found, contact_mismatch) or *domain.ValidationError values.
type SelfService interface {
	StartSession(ctx context.Context, cmd account.StartSession) error
	EndSession(ctx context.Context, cmd account.EndSession) (account.SessionEnded, error)
	ChangePassword(ctx context.Context, cmd account.ChangePassword) (account.GovernanceResult, error)
	RevokeTokens(ctx context.Context, tenant domain.TenantID, user domain.UserID, reason string, meta account.Meta) (account.GovernanceResult, error)
	ResetPassword(ctx context.Context, tenant domain.TenantID, user domain.UserID, password string, meta account.Meta) (account.GovernanceResult, error)
	BindContact(ctx context.Context, cmd account.BindContact) (account.GovernanceResult, error)
	CheckPassword(ctx context.Context, tenant domain.TenantID, user domain.UserID, password string) error
	CheckNewPassword(password string) error
	ResetSubject(ctx context.Context, tenant domain.TenantID, login, channel, targetHash string) (domain.UserID, error)
}

var _ SelfService = (*account.SelfService)(nil)

// SessionLister lists a user's active login sessions from the read model; *login.Store
// implements it.
type SessionLister interface {
	ActiveSessions(ctx context.Context, tenant domain.TenantID, user domain.UserID, now time.Time) ([]login.Session, error)
}

var _ SessionLister = (*login.Store)(nil)

// AccountEraser deletes a user's account for good at their own request: it erases what the user
// wrote and said about themselves, frees the login name and ends every session (DESIGN §7a). The
// REST API checks the password before it calls it. Errors: domain.ErrNotFound for a user without
// an account; domain.ErrRetryable when a store failed (calling it again finishes the job).
type AccountEraser interface {
	EraseAccount(ctx context.Context, tenant domain.TenantID, user domain.UserID) error
}

// ReasonNoSession refuses a logout with a token that names no login session (one issued before
// sessions existed, or by `imledger token issue`): log out everywhere instead, or let it expire.
const ReasonNoSession = "no_session"

// Reasons the account stream records for what a user did (UserTokensRevoked.Reason).
const reasonLogoutEverywhere = "logout_everywhere"

// selfMeta attributes a change to the user who asked for it.
func selfMeta(ctx context.Context, user domain.UserID) account.Meta {
	return account.Meta{Actor: domain.Actor{Type: domain.ActorUser, ID: user.String()}, TraceID: RequestID(ctx)}
}

// newSessionID returns the id of a new login session: a UUIDv7, time-ordered.
func newSessionID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// ipHint is the network of the client address ip that a login session records: its IPv4 /24 or
// IPv6 /48, never the address itself; "" when ip is no address.
func ipHint(ip string) string {
	addr := net.ParseIP(ip)
	switch {
	case addr == nil:
		return ""
	case addr.To4() != nil:
		return (&net.IPNet{IP: addr.To4().Mask(net.CIDRMask(24, 32)), Mask: net.CIDRMask(24, 32)}).String()
	}
	return (&net.IPNet{IP: addr.Mask(net.CIDRMask(48, 128)), Mask: net.CIDRMask(48, 128)}).String()
}

// cleanUserAgent is the part of a User-Agent header a login session keeps: without control
// characters and invalid UTF-8, at most domain.MaxUserAgentLen characters.
func cleanUserAgent(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			continue
		}
		if n == domain.MaxUserAgentLen {
			break
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimSpace(b.String())
}

// checkDevice refuses a device label a login session would refuse, before the login spends any
// work: a *domain.ValidationError on field device.
func checkDevice(device string) error {
	ls, err := domain.NewLoginSession(domain.MustTenantID("check"), 1, "check")
	if err != nil {
		return err
	}
	now := time.Now()
	_, err = ls.Start(domain.SessionStart{Device: device, StartedAt: now, ExpiresAt: now.Add(time.Hour)})
	return err
}
