package domain

import (
	"time"
)

// User profile limits, in characters (runes).
const (
	MaxNicknameLen  = 32
	MaxSignatureLen = 128
)

// EventUserProfileUpdated is the event type of a changed public user profile (Category business).
const EventUserProfileUpdated EventType = "user.profile_updated.v1"

// EventUserDiscoverableSet is the event type of a user's choice to be found, or not, by other
// users' search (Category business). A user who never chose is discoverable.
const EventUserDiscoverableSet EventType = "user.discoverable_set.v1"

// ProfileStreamID is the stream of one user's public profile: "user:<uid>".
func ProfileStreamID(u UserID) string { return "user:" + u.String() }

// UserProfile is a user's public profile: nickname (required), avatar URL and status signature.
// It holds nothing secret: credentials and verification data never enter the model or its events.
type UserProfile struct {
	nickname, avatar, signature string
}

// NewUserProfile validates the profile: nickname 1..MaxNicknameLen characters on one line,
// avatar empty or an absolute http(s) URL of at most MaxAvatarURLLen bytes without spaces,
// signature at most MaxSignatureLen characters on one line. Failures are *ValidationError with field nickname, avatar or signature
// and reason required, too_long or bad_format.
func NewUserProfile(nickname, avatar, signature string) (UserProfile, error) {
	if err := checkText("nickname", nickname, true, MaxNicknameLen, false); err != nil {
		return UserProfile{}, err
	}
	if err := checkAvatar(avatar); err != nil {
		return UserProfile{}, err
	}
	if err := checkText("signature", signature, false, MaxSignatureLen, false); err != nil {
		return UserProfile{}, err
	}
	return UserProfile{nickname: nickname, avatar: avatar, signature: signature}, nil
}

// Nickname returns the nickname.
func (p UserProfile) Nickname() string { return p.nickname }

// Avatar returns the avatar URL, possibly empty.
func (p UserProfile) Avatar() string { return p.avatar }

// Signature returns the status signature, possibly empty.
func (p UserProfile) Signature() string { return p.signature }

// IsZero reports whether p is unset.
func (p UserProfile) IsZero() bool { return p == UserProfile{} }

// ProfilePatch names the public profile fields a change sets; a nil field keeps the value the
// profile has when the change is decided. The zero ProfilePatch changes nothing.
type ProfilePatch struct {
	Nickname, Avatar, Signature *string
	// Discoverable, when set, is whether other users' search finds the user.
	Discoverable *bool
}

// touchesProfile reports whether pp sets a field of the public profile itself.
func (pp ProfilePatch) touchesProfile() bool {
	return pp.Nickname != nil || pp.Avatar != nil || pp.Signature != nil
}

// Patch returns the patch that sets every field to p's, replacing the whole profile.
func (p UserProfile) Patch() ProfilePatch {
	return ProfilePatch{Nickname: &p.nickname, Avatar: &p.avatar, Signature: &p.signature}
}

// Merge returns base with the patch's fields set, validated as NewUserProfile. The fields the
// patch sets are checked first, so a bad value is reported as itself even when base is empty;
// then the merged profile, so an empty base with no nickname set is nickname/required. An avatar
// the patch leaves alone is kept as recorded, even one an older rule admitted that the URL rule
// of NewUserProfile would refuse, so such a profile can still change its other fields.
func (pp ProfilePatch) Merge(base UserProfile) (UserProfile, error) {
	if pp.Nickname != nil {
		if err := checkText("nickname", *pp.Nickname, true, MaxNicknameLen, false); err != nil {
			return UserProfile{}, err
		}
		base.nickname = *pp.Nickname
	}
	if pp.Avatar != nil {
		if err := checkAvatar(*pp.Avatar); err != nil {
			return UserProfile{}, err
		}
		base.avatar = *pp.Avatar
	}
	if pp.Signature != nil {
		if err := checkText("signature", *pp.Signature, false, MaxSignatureLen, false); err != nil {
			return UserProfile{}, err
		}
		base.signature = *pp.Signature
	}
	if _, err := NewUserProfile(checkable(base, pp.Avatar == nil)); err != nil {
		return UserProfile{}, err
	}
	return base, nil
}

// checkable returns the fields of a merged profile to check as NewUserProfile: a field that is a
// sealed value (DESIGN §7a) was checked when it was written and reads as a valid stand-in, and
// an avatar the patch left alone is not checked again.
func checkable(p UserProfile, keepAvatar bool) (nickname, avatar, signature string) {
	nickname, avatar, signature = p.nickname, p.avatar, p.signature
	if IsSealed(nickname) {
		nickname = "-"
	}
	if keepAvatar || IsSealed(avatar) {
		avatar = ""
	}
	if IsSealed(signature) {
		signature = ""
	}
	return nickname, avatar, signature
}

// UserProfileUpdated is the payload of user.profile_updated.v1: the whole new public profile.
type UserProfileUpdated struct {
	User      UserID    `json:"user"`
	Nickname  string    `json:"nickname"`
	Avatar    string    `json:"avatar,omitempty"`
	Signature string    `json:"signature,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// UserDiscoverableSet is the payload of user.discoverable_set.v1: whether search finds User.
type UserDiscoverableSet struct {
	User         UserID    `json:"user"`
	Discoverable bool      `json:"discoverable"`
	SetAt        time.Time `json:"set_at"`
}

// ProfileState is a user's profile folded from its stream (ProfileStreamID).
type ProfileState struct {
	tenant    TenantID
	user      UserID
	version   int64
	profile   UserProfile
	hidden    bool // the user chose not to be found by search
	updatedAt time.Time
}

// NewProfileState returns the empty profile state of user (no profile set yet).
func NewProfileState(tenant TenantID, user UserID) (ProfileState, error) {
	if tenant.IsZero() {
		return ProfileState{}, invalid("tenant_id", "required", "")
	}
	if user <= 0 {
		return ProfileState{}, invalid("user_id", "bad_format", "a positive 64-bit number")
	}
	return ProfileState{tenant: tenant, user: user}, nil
}

// FoldProfile builds the profile state of user from its events in stream order.
func FoldProfile(tenant TenantID, user UserID, events []Envelope) (ProfileState, error) {
	s, err := NewProfileState(tenant, user)
	if err != nil {
		return ProfileState{}, err
	}
	for _, e := range events {
		if err := s.Apply(e); err != nil {
			return ProfileState{}, err
		}
	}
	return s, nil
}

// Apply folds the next event of the profile stream into s; ErrStreamMismatch when env does not
// fit, leaving s unchanged.
func (s *ProfileState) Apply(env Envelope) error {
	p, err := decodePayload(env, s.tenant, s.StreamID(), s.version)
	if err != nil {
		return err
	}
	switch e := p.(type) {
	case *UserRegistered:
		// Registration opens the stream; the profile itself arrives as the next event.
		s.updatedAt = e.RegisteredAt
	case *UserProfileUpdated:
		s.profile = UserProfile{nickname: e.Nickname, avatar: e.Avatar, signature: e.Signature}
		s.updatedAt = e.UpdatedAt
	case *UserDiscoverableSet:
		s.hidden = !e.Discoverable
		s.updatedAt = e.SetAt
	default:
		return unknownEvent(s.StreamID(), p)
	}
	s.version = env.StreamVersion
	return nil
}

// Tenant returns the tenant.
func (s ProfileState) Tenant() TenantID { return s.tenant }

// User returns the user.
func (s ProfileState) User() UserID { return s.user }

// StreamID returns the profile's stream id.
func (s ProfileState) StreamID() string { return ProfileStreamID(s.user) }

// Version returns the stream version folded so far.
func (s ProfileState) Version() int64 { return s.version }

// Profile returns the current profile; zero before the first update.
func (s ProfileState) Profile() UserProfile { return s.profile }

// Discoverable reports whether other users' search finds the user: true unless they chose not.
func (s ProfileState) Discoverable() bool { return !s.hidden }

// UpdatedAt returns when the profile last changed.
func (s ProfileState) UpdatedAt() time.Time { return s.updatedAt }

// Update decides user.profile_updated.v1 with the whole new profile. Only the user changes their
// own profile. Refusals: tenant_mismatch, not_self; a zero profile is a *ValidationError. An
// unchanged profile decides nothing.
func (s ProfileState) Update(p Principal, profile UserProfile, now time.Time) ([]PendingEvent, error) {
	if p.Tenant != s.tenant {
		return nil, Deny(ReasonTenantMismatch)
	}
	if p.User != s.user {
		return nil, Deny(ReasonNotSelf)
	}
	if profile.IsZero() {
		return nil, invalid("nickname", "required", "")
	}
	if profile == s.profile {
		return nil, nil
	}
	return []PendingEvent{{StreamID: s.StreamID(), ExpectedVersion: s.version, Type: EventUserProfileUpdated,
		Payload: &UserProfileUpdated{User: s.user, Nickname: profile.nickname, Avatar: profile.avatar,
			Signature: profile.signature, UpdatedAt: now.UTC()}}}, nil
}

// Patch decides user.profile_updated.v1 with s's profile changed by patch: the fields the patch
// leaves out keep the values s holds, so a patch decided on the stream's current version never
// loses a change committed before it; and user.discoverable_set.v1 when the patch sets
// Discoverable to another value than s's. Refusals as Update; a bad field is a *ValidationError
// (see ProfilePatch.Merge). A patch that changes nothing, the empty one included, decides nothing.
func (s ProfileState) Patch(p Principal, patch ProfilePatch, now time.Time) ([]PendingEvent, error) {
	if p.Tenant != s.tenant {
		return nil, Deny(ReasonTenantMismatch)
	}
	if p.User != s.user {
		return nil, Deny(ReasonNotSelf)
	}
	var events []PendingEvent
	if patch.touchesProfile() || patch.Discoverable == nil { // the empty patch checks the profile as ever

		profile, err := patch.Merge(s.profile)
		if err != nil {
			return nil, err
		}
		if events, err = s.Update(p, profile, now); err != nil {
			return nil, err
		}
	}
	if d := patch.Discoverable; d != nil && *d == s.hidden {
		events = append(events, PendingEvent{StreamID: s.StreamID(), ExpectedVersion: s.version, Type: EventUserDiscoverableSet,
			Payload: &UserDiscoverableSet{User: s.user, Discoverable: *d, SetAt: now.UTC()}})
	}
	return events, nil
}
