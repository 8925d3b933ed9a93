package domain

import "time"

// Login session event types (Category business, im.business.event). A login session is what one
// login made: the token it issued names it (claim sid), the user lists it with its device, and
// signing it out refuses that token on every node. Each has a stream, LoginSessionStreamID:
// user.session_started.v1 is version 1, user.session_ended.v1 version 2. These are not the
// realtime connections of session.opened.v1 (im.session.event): one login session may hold many
// WebSocket connections, on many nodes.
const (
	EventUserSessionStarted EventType = "user.session_started.v1"
	EventUserSessionEnded   EventType = "user.session_ended.v1"
)

// Limits of what a login session records about its client.
const (
	MaxSessionIDLen = 64  // bytes of [A-Za-z0-9_-]
	MaxDeviceLen    = 64  // characters of the label the client gives its device
	MaxUserAgentLen = 256 // characters of the client's User-Agent
	MaxIPHintLen    = 64  // bytes of the network prefix
)

// Why a login session ended (UserSessionEnded.Reason).
const (
	// SessionEndLogout: the session logged itself out.
	SessionEndLogout = "logout"
	// SessionEndSignedOut: another session of the user signed it out.
	SessionEndSignedOut = "signed_out"
)

// ReasonSessionNotFound refuses ending a login session the user does not have.
const ReasonSessionNotFound = "session_not_found"

// LoginSessionStreamID is the stream of user's login session id: "user:<uid>/login/<id>". Its
// ConversationKey is the user's profile stream, so a user's events stay in order on Kafka.
func LoginSessionStreamID(user UserID, id string) string {
	return ProfileStreamID(user) + "/login/" + id
}

// CheckSessionID validates a login session id: 1..MaxSessionIDLen of [A-Za-z0-9_-] (a UUID
// qualifies). Failures are *ValidationError with field session_id.
func CheckSessionID(id string) error {
	if id == "" {
		return invalid("session_id", "required", "")
	}
	if len(id) > MaxSessionIDLen {
		return invalid("session_id", "too_long", "at most 64 characters")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return invalid("session_id", "bad_format", "only A-Z, a-z, 0-9, '_' and '-'")
		}
	}
	return nil
}

// UserSessionStarted is the payload of user.session_started.v1. StartedAt is the issue time of
// the session's token (to the millisecond) and ExpiresAt its expiry. Device, UserAgent and IPHint
// describe the client so its user can tell sessions apart; they are the user's personal data:
// IPHint is only the network (an IPv4 /24 or an IPv6 /48, "203.0.113.0/24"), never the address.
type UserSessionStarted struct {
	User      UserID    `json:"user"`
	SessionID string    `json:"session_id"`
	Device    string    `json:"device,omitempty"`
	UserAgent string    `json:"user_agent,omitempty"`
	IPHint    string    `json:"ip_hint,omitempty"`
	StartedAt time.Time `json:"started_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// UserSessionEnded is the payload of user.session_ended.v1: the session's token is refused from
// then on. Reason is SessionEndLogout or SessionEndSignedOut; By is the session that signed it
// out (SessionEndSignedOut only). ExpiresAt repeats the token's expiry, after which nothing needs
// to remember the revocation.
type UserSessionEnded struct {
	User      UserID    `json:"user"`
	SessionID string    `json:"session_id"`
	Reason    string    `json:"reason"`
	By        string    `json:"by,omitempty"`
	EndedAt   time.Time `json:"ended_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// SessionStart describes a login session being started.
type SessionStart struct {
	Device, UserAgent, IPHint string
	StartedAt, ExpiresAt      time.Time
}

// LoginSession is one login session folded from its stream.
type LoginSession struct {
	tenant  TenantID
	user    UserID
	id      string
	version int64
	started UserSessionStarted
	ended   bool
}

// NewLoginSession returns the state of login session id of user before any event: not started.
// A bad tenant, user or id is a *ValidationError.
func NewLoginSession(tenant TenantID, user UserID, id string) (LoginSession, error) {
	switch {
	case tenant.IsZero():
		return LoginSession{}, invalid("tenant_id", "required", "")
	case user <= 0:
		return LoginSession{}, invalid("user_id", "bad_format", "a positive 64-bit number")
	}
	if err := CheckSessionID(id); err != nil {
		return LoginSession{}, err
	}
	return LoginSession{tenant: tenant, user: user, id: id}, nil
}

// Apply folds the next event of the session's stream; ErrStreamMismatch when it does not fit.
func (s *LoginSession) Apply(env Envelope) error {
	stream := LoginSessionStreamID(s.user, s.id)
	p, err := decodePayload(env, s.tenant, stream, s.version)
	if err != nil {
		return err
	}
	switch e := p.(type) {
	case *UserSessionStarted:
		s.started = *e
	case *UserSessionEnded:
		s.ended = true
	default:
		return unknownEvent(stream, p)
	}
	s.version = env.StreamVersion
	return nil
}

// Version returns the stream version folded so far.
func (s LoginSession) Version() int64 { return s.version }

// Started reports whether the session was started; Ended whether it ended.
func (s LoginSession) Started() bool { return s.version > 0 }

// Ended reports whether the session ended.
func (s LoginSession) Ended() bool { return s.ended }

// ExpiresAt returns the expiry of the session's token; zero before it started.
func (s LoginSession) ExpiresAt() time.Time { return s.started.ExpiresAt }

func (s LoginSession) event(typ EventType, payload any) PendingEvent {
	return PendingEvent{StreamID: LoginSessionStreamID(s.user, s.id), ExpectedVersion: s.version, Type: typ, Payload: payload}
}

// Start decides user.session_started.v1. Refusals (*ValidationError): a session started before,
// a device, user agent or IP hint that is too long or not one line of text, a zero start or an
// expiry not after it.
func (s LoginSession) Start(in SessionStart) ([]PendingEvent, error) {
	if s.Started() {
		return nil, invalid("session_id", "taken", "the session was started before")
	}
	if err := checkText("device", in.Device, false, MaxDeviceLen, false); err != nil {
		return nil, err
	}
	if err := checkText("user_agent", in.UserAgent, false, MaxUserAgentLen, false); err != nil {
		return nil, err
	}
	if err := checkText("ip_hint", in.IPHint, false, MaxIPHintLen, false); err != nil {
		return nil, err
	}
	if in.StartedAt.IsZero() || !in.ExpiresAt.After(in.StartedAt) {
		return nil, invalid("expires_at", "bad_format", "after the start")
	}
	return []PendingEvent{s.event(EventUserSessionStarted, &UserSessionStarted{User: s.user, SessionID: s.id,
		Device: in.Device, UserAgent: in.UserAgent, IPHint: in.IPHint, StartedAt: in.StartedAt.UTC(), ExpiresAt: in.ExpiresAt.UTC()})}, nil
}

// End decides user.session_ended.v1 with reason, by the session by when another session of the
// user ends it (by "" or the session itself: a logout). A session that ended decides nothing. A
// session never started is *DeniedError session_not_found.
func (s LoginSession) End(by string, now time.Time) ([]PendingEvent, error) {
	if !s.Started() {
		return nil, Deny(ReasonSessionNotFound)
	}
	if s.ended {
		return nil, nil
	}
	reason := SessionEndSignedOut
	if by == "" || by == s.id {
		reason, by = SessionEndLogout, ""
	}
	return []PendingEvent{s.event(EventUserSessionEnded, &UserSessionEnded{User: s.user, SessionID: s.id, Reason: reason,
		By: by, EndedAt: now.UTC(), ExpiresAt: s.started.ExpiresAt})}, nil
}
