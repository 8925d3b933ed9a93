package domain

import (
	"strings"
	"time"
)

// Login name limits: 3..32 of [a-z0-9_.-].
const (
	MinLoginLen = 3
	MaxLoginLen = 32
)

// EventUserRegistered is the event type of a new account (Category business). It is version 1
// of the user's stream (ProfileStreamID); the public profile follows as user.profile_updated.v1.
const EventUserRegistered EventType = "user.registered.v1"

// Login is a validated login name: 3..MaxLoginLen characters of [a-z0-9_.-], unique per tenant.
type Login struct{ v string }

// NewLogin validates a login name. ASCII upper-case letters are folded to lower case first, so
// "Alice" and "alice" are the same login. Failures are *ValidationError with field login and
// reason required, too_short, too_long or bad_format.
func NewLogin(s string) (Login, error) {
	if s == "" {
		return Login{}, invalid("login", "required", "")
	}
	s = foldASCII(s)
	switch {
	case len(s) < MinLoginLen:
		return Login{}, invalid("login", "too_short", "at least 3 characters")
	case len(s) > MaxLoginLen:
		return Login{}, invalid("login", "too_long", "at most 32 characters")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '.' && c != '-' {
			return Login{}, invalid("login", "bad_format", "only a-z, 0-9, '_', '.' and '-'")
		}
	}
	return Login{v: s}, nil
}

// foldASCII is s with ASCII upper-case letters in lower case and no other character folded.
// strings.ToLower would fold some non-ASCII letters into ASCII ones (the Kelvin sign U+212A
// becomes "k"), so a name only looking like another would be taken for it.
func foldASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// String returns the login name.
func (l Login) String() string { return l.v }

// IsZero reports whether l is unset.
func (l Login) IsZero() bool { return l.v == "" }

// UserRegistered is the payload of user.registered.v1. It names the account and nothing secret:
// passwords and their hashes never enter an event. The tenant is the envelope's.
type UserRegistered struct {
	User         UserID    `json:"user"`
	Login        string    `json:"login"`
	RegisteredAt time.Time `json:"registered_at"`
}

// Register decides the events of a new account in tenant: user.registered.v1 at version 1 of
// the user's stream, followed by user.profile_updated.v1 at version 2 when profile is set.
// The stream must be empty when they are appended (expected version 0), so an id drawn twice
// fails with ErrConcurrency instead of overwriting an account. Bad arguments are
// *ValidationError values.
func Register(tenant TenantID, user UserID, login Login, profile UserProfile, now time.Time) ([]PendingEvent, error) {
	switch {
	case tenant.IsZero():
		return nil, invalid("tenant_id", "required", "")
	case user <= 0:
		return nil, invalid("user_id", "bad_format", "a positive 64-bit number")
	case login.IsZero():
		return nil, invalid("login", "required", "")
	}
	now = now.UTC()
	stream := ProfileStreamID(user)
	events := []PendingEvent{{StreamID: stream, ExpectedVersion: 0, Type: EventUserRegistered,
		Payload: &UserRegistered{User: user, Login: login.String(), RegisteredAt: now}}}
	if !profile.IsZero() {
		events = append(events, PendingEvent{StreamID: stream, ExpectedVersion: 0, Type: EventUserProfileUpdated,
			Payload: &UserProfileUpdated{User: user, Nickname: profile.nickname, Avatar: profile.avatar,
				Signature: profile.signature, UpdatedAt: now}})
	}
	return events, nil
}
