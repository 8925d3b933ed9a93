package domain

import "time"

// TokenCutoff is which of a user's tokens account governance still admits, as the account
// stream decides it: every token issued at or after NotBefore, and, after a password change that
// kept the session it was made from, the tokens of KeptSession issued at or after KeptSince.
// Per-session revocations (user.session_ended.v1) are kept beside it, not in it.
//
// The zero TokenCutoff admits every token.
type TokenCutoff struct {
	// NotBefore refuses tokens issued before it; zero refuses none.
	NotBefore time.Time
	// KeptSession is the login session a password change kept ("" when none): its tokens
	// issued at or after KeptSince stay admitted though they predate NotBefore.
	KeptSession string
	KeptSince   time.Time
}

// Admits reports whether a token of session (its login session id, "" for a token without one)
// issued at issuedAt passes the cutoff. A zero issuedAt (a login being decided, whose token is
// new) always passes.
func (c TokenCutoff) Admits(issuedAt time.Time, session string) bool {
	if issuedAt.IsZero() || !issuedAt.Before(c.NotBefore) {
		return true
	}
	return session != "" && session == c.KeptSession && !issuedAt.Before(c.KeptSince)
}

// RevokeBefore refuses every token issued before t (a ban, a revocation, a password reset): the
// cutoff moves to t unless it is later already, and no session is kept any more.
func (c TokenCutoff) RevokeBefore(t time.Time) TokenCutoff {
	if t.After(c.NotBefore) {
		c.NotBefore = t
	}
	c.KeptSession, c.KeptSince = "", time.Time{}
	return c
}

// RevokeOthers refuses every token issued before t except those of session kept (a password
// change made from that session): a token of kept that the cutoff admitted before still passes,
// one it refused still fails. kept "" is RevokeBefore.
func (c TokenCutoff) RevokeOthers(t time.Time, kept string) TokenCutoff {
	if kept == "" {
		return c.RevokeBefore(t)
	}
	// The tokens of kept that passed so far: issued at or after NotBefore, or, when kept was the
	// kept session already, at or after KeptSince (which is never after NotBefore).
	since := c.NotBefore
	if c.KeptSession == kept {
		since = c.KeptSince
	}
	c = c.RevokeBefore(t)
	c.KeptSession, c.KeptSince = kept, since
	return c
}

// FoldCutoff applies the payload of an account stream event to c: user.banned.v1,
// user.tokens_revoked.v1, user.password_reset.v1 and user.erased.v1 revoke every token before their time,
// user.password_changed.v1 every token but its kept session's. Other payloads change nothing
// (changed is false). A read model that keeps only the cutoff folds with it; the account stream
// folds the same way (AccountState).
func FoldCutoff(c TokenCutoff, payload any) (next TokenCutoff, changed bool) {
	switch e := payload.(type) {
	case *UserBanned:
		return c.RevokeBefore(e.BannedAt), true
	case *UserTokensRevoked:
		return c.RevokeBefore(e.NotBefore), true
	case *UserPasswordReset:
		return c.RevokeBefore(e.ResetAt), true
	case *UserErased:
		return c.RevokeBefore(e.ErasedAt), true
	case *UserPasswordChanged:
		return c.RevokeOthers(e.ChangedAt, e.KeptSession), true
	}
	return c, false
}
