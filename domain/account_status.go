package domain

import "time"

// Account governance event types (Category business), on the user's account stream
// AccountStreamID. They carry no secret: a password reset records only that it happened.
const (
	EventUserBanned        EventType = "user.banned.v1"
	EventUserUnbanned      EventType = "user.unbanned.v1"
	EventUserKicked        EventType = "user.kicked.v1"
	EventUserTokensRevoked EventType = "user.tokens_revoked.v1"
	EventUserPasswordReset EventType = "user.password_reset.v1"
	// EventUserPasswordChanged is a password its user changed, giving the old one: every token
	// of the user issued before it is refused but those of the login session it was made from.
	EventUserPasswordChanged EventType = "user.password_changed.v1"
	// EventUserContactChanged is a verified phone number or e-mail address bound to the account
	// for password resets. Only the channel is recorded: the address stays outside the log.
	EventUserContactChanged EventType = "user.contact_changed.v1"
	// EventUserErased is an account erased for good (DESIGN §7a): its data keys are destroyed,
	// so everything it wrote reads as erased; every token is refused and the login name freed.
	EventUserErased EventType = "user.erased.v1"
)

// ReasonUserBanned refuses a banned user's login, token and sessions.
const ReasonUserBanned = "user_banned"

// MaxReasonLen is the longest reason an administrator may record, in characters.
const MaxReasonLen = 512

// AccountStreamID is the stream of a user's account governance: "user:<uid>/account". Its
// ConversationKey is the user's profile stream, so a user's events stay in order on Kafka.
func AccountStreamID(u UserID) string { return ProfileStreamID(u) + "/account" }

// UserBanned is the payload of user.banned.v1: the user may not log in and every token issued
// before BannedAt stays refused after an unban.
type UserBanned struct {
	User     UserID    `json:"user"`
	Reason   string    `json:"reason,omitempty"`
	BannedAt time.Time `json:"banned_at"`
}

// UserUnbanned is the payload of user.unbanned.v1.
type UserUnbanned struct {
	User       UserID    `json:"user"`
	Reason     string    `json:"reason,omitempty"`
	UnbannedAt time.Time `json:"unbanned_at"`
}

// UserKicked is the payload of user.kicked.v1: every session of the user was ended; its
// tokens stay valid.
type UserKicked struct {
	User     UserID    `json:"user"`
	Reason   string    `json:"reason,omitempty"`
	KickedAt time.Time `json:"kicked_at"`
}

// UserTokensRevoked is the payload of user.tokens_revoked.v1: tokens issued before NotBefore
// are refused from then on.
type UserTokensRevoked struct {
	User      UserID    `json:"user"`
	Reason    string    `json:"reason,omitempty"`
	NotBefore time.Time `json:"not_before"`
}

// UserPasswordReset is the payload of user.password_reset.v1. The password is not in it; tokens
// issued before ResetAt are refused from then on.
type UserPasswordReset struct {
	User    UserID    `json:"user"`
	ResetAt time.Time `json:"reset_at"`
}

// UserPasswordChanged is the payload of user.password_changed.v1. The password is not in it.
// Tokens issued before ChangedAt are refused from then on, except those of KeptSession (the
// login session the change was made from; "" for a token without one) that were admitted
// before (TokenCutoff.RevokeOthers).
type UserPasswordChanged struct {
	User        UserID    `json:"user"`
	KeptSession string    `json:"kept_session,omitempty"`
	ChangedAt   time.Time `json:"changed_at"`
}

// UserContactChanged is the payload of user.contact_changed.v1: a contact of channel ("sms" or
// "email"), proven by a verification code, now serves the account's password resets. The number
// or address is not in it.
type UserContactChanged struct {
	User      UserID    `json:"user"`
	Channel   string    `json:"channel"`
	ChangedAt time.Time `json:"changed_at"`
}

// UserErased is the payload of user.erased.v1. It carries nothing personal: the user id and
// when. Read models clear what they hold of the user's content and profile when they apply it.
type UserErased struct {
	User     UserID    `json:"user"`
	ErasedAt time.Time `json:"erased_at"`
}

// AccountState is a user's account governance folded from AccountStreamID: whether the user is
// banned and which of its tokens are refused.
type AccountState struct {
	tenant  TenantID
	user    UserID
	version int64
	banned  bool
	cutoff  TokenCutoff
}

// NewAccountState returns the state of an account with no governance events.
func NewAccountState(tenant TenantID, user UserID) (AccountState, error) {
	if tenant.IsZero() {
		return AccountState{}, invalid("tenant_id", "required", "")
	}
	if user <= 0 {
		return AccountState{}, invalid("user_id", "bad_format", "a positive 64-bit number")
	}
	return AccountState{tenant: tenant, user: user}, nil
}

// RestoreAccountState returns the state of an account as a snapshot recorded it after folding
// the stream up to version: whether the user is banned and before when their tokens are refused.
func RestoreAccountState(tenant TenantID, user UserID, version int64, banned bool, notBefore time.Time) (AccountState, error) {
	s, err := NewAccountState(tenant, user)
	if err != nil {
		return AccountState{}, err
	}
	if version < 0 {
		return AccountState{}, invalid("version", "bad_format", "not negative")
	}
	s.version, s.banned, s.cutoff.NotBefore = version, banned, notBefore
	return s, nil
}

// WithKeptSession returns s with the session a password change kept, as a snapshot recorded it
// (TokenCutoff.KeptSession, KeptSince).
func (s AccountState) WithKeptSession(session string, since time.Time) AccountState {
	s.cutoff.KeptSession, s.cutoff.KeptSince = session, since
	if session == "" {
		s.cutoff.KeptSince = time.Time{}
	}
	return s
}

// Apply folds the next event of the account stream; ErrStreamMismatch when it does not fit.
func (s *AccountState) Apply(env Envelope) error {
	p, err := decodePayload(env, s.tenant, AccountStreamID(s.user), s.version)
	if err != nil {
		return err
	}
	switch p.(type) {
	case *UserBanned, *UserErased:
		// An erased account is refused as a banned one is, for good: its login name is freed.
		s.banned = true
	case *UserUnbanned:
		s.banned = false
	case *UserKicked, *UserTokensRevoked, *UserPasswordReset, *UserPasswordChanged, *UserContactChanged:
	default:
		return unknownEvent(AccountStreamID(s.user), p)
	}
	s.cutoff, _ = FoldCutoff(s.cutoff, p)
	s.version = env.StreamVersion
	return nil
}

// User returns the user.
func (s AccountState) User() UserID { return s.user }

// Version returns the stream version folded so far.
func (s AccountState) Version() int64 { return s.version }

// Banned reports whether the user is banned.
func (s AccountState) Banned() bool { return s.banned }

// NotBefore returns the time before which the user's tokens are refused; zero when none is.
func (s AccountState) NotBefore() time.Time { return s.cutoff.NotBefore }

// Cutoff returns which of the user's tokens the account admits.
func (s AccountState) Cutoff() TokenCutoff { return s.cutoff }

func (s AccountState) event(typ EventType, payload any) PendingEvent {
	return PendingEvent{StreamID: AccountStreamID(s.user), ExpectedVersion: s.version, Type: typ, Payload: payload}
}

// Ban decides user.banned.v1; a banned user decides nothing. A reason over MaxReasonLen
// characters is a *ValidationError.
func (s AccountState) Ban(reason string, now time.Time) ([]PendingEvent, error) {
	if err := checkText("reason", reason, false, MaxReasonLen, false); err != nil {
		return nil, err
	}
	if s.banned {
		return nil, nil
	}
	return []PendingEvent{s.event(EventUserBanned, &UserBanned{User: s.user, Reason: reason, BannedAt: now.UTC()})}, nil
}

// Unban decides user.unbanned.v1; a user who is not banned decides nothing.
func (s AccountState) Unban(reason string, now time.Time) ([]PendingEvent, error) {
	if err := checkText("reason", reason, false, MaxReasonLen, false); err != nil {
		return nil, err
	}
	if !s.banned {
		return nil, nil
	}
	return []PendingEvent{s.event(EventUserUnbanned, &UserUnbanned{User: s.user, Reason: reason, UnbannedAt: now.UTC()})}, nil
}

// Kick decides user.kicked.v1.
func (s AccountState) Kick(reason string, now time.Time) ([]PendingEvent, error) {
	if err := checkText("reason", reason, false, MaxReasonLen, false); err != nil {
		return nil, err
	}
	return []PendingEvent{s.event(EventUserKicked, &UserKicked{User: s.user, Reason: reason, KickedAt: now.UTC()})}, nil
}

// RevokeTokens decides user.tokens_revoked.v1 with not-before now.
func (s AccountState) RevokeTokens(reason string, now time.Time) ([]PendingEvent, error) {
	if err := checkText("reason", reason, false, MaxReasonLen, false); err != nil {
		return nil, err
	}
	return []PendingEvent{s.event(EventUserTokensRevoked, &UserTokensRevoked{User: s.user, Reason: reason, NotBefore: now.UTC()})}, nil
}

// ResetPassword decides user.password_reset.v1.
func (s AccountState) ResetPassword(now time.Time) []PendingEvent {
	return []PendingEvent{s.event(EventUserPasswordReset, &UserPasswordReset{User: s.user, ResetAt: now.UTC()})}
}

// ChangePassword decides user.password_changed.v1, keeping login session kept ("" keeps none).
// A kept session id that CheckSessionID refuses is a *ValidationError.
func (s AccountState) ChangePassword(kept string, now time.Time) ([]PendingEvent, error) {
	if kept != "" {
		if err := CheckSessionID(kept); err != nil {
			return nil, err
		}
	}
	return []PendingEvent{s.event(EventUserPasswordChanged, &UserPasswordChanged{User: s.user, KeptSession: kept, ChangedAt: now.UTC()})}, nil
}

// ChangeContact decides user.contact_changed.v1 for channel "sms" or "email" (a
// *ValidationError otherwise).
func (s AccountState) ChangeContact(channel string, now time.Time) ([]PendingEvent, error) {
	if channel != "sms" && channel != "email" {
		return nil, invalid("channel", "unknown", "sms or email")
	}
	return []PendingEvent{s.event(EventUserContactChanged, &UserContactChanged{User: s.user, Channel: channel, ChangedAt: now.UTC()})}, nil
}

// Erase decides user.erased.v1. It always decides one, so repeating an erasure that failed
// half-way records it again rather than nothing.
func (s AccountState) Erase(now time.Time) []PendingEvent {
	return []PendingEvent{s.event(EventUserErased, &UserErased{User: s.user, ErasedAt: now.UTC()})}
}

// CheckReason validates an administrator's reason: at most MaxReasonLen characters on one line,
// not blank when required. Failures are *ValidationError with field reason.
func CheckReason(reason string, required bool) error {
	return checkText("reason", reason, required, MaxReasonLen, false)
}
