package verify

import (
	"strings"

	"github.com/imledger/imledger/domain"
)

// Scene is what a code is for; codes of one scene never pass for another.
type Scene string

// The scenes.
const (
	SceneRegister      Scene = "register"
	SceneLogin         Scene = "login"
	SceneResetPassword Scene = "reset_password"
	SceneChangePhone   Scene = "change_phone"
)

// ParseScene returns the scene named s; an unknown one is a *domain.ValidationError on field scene.
func ParseScene(s string) (Scene, error) {
	switch sc := Scene(s); sc {
	case SceneRegister, SceneLogin, SceneResetPassword, SceneChangePhone:
		return sc, nil
	}
	return "", &domain.ValidationError{Field: "scene", Reason: "unknown", Detail: "register, login, reset_password or change_phone"}
}

// Channel is how a code is delivered.
type Channel string

// The channels.
const (
	ChannelSMS   Channel = "sms"
	ChannelEmail Channel = "email"
)

// Target is a normalized phone number or e-mail address a code is sent to. Only Service ever
// sees it in clear; everything stored keeps its keyed hash.
type Target struct {
	channel Channel
	value   string
}

// NewTarget validates exactly one of phone and email: a phone is 6..20 digits with an optional
// leading + (spaces, dashes, dots and parentheses are dropped); an e-mail address is folded to
// lower case, at most 254 bytes with one @ and text on both sides.
func NewTarget(phone, email string) (Target, error) {
	switch {
	case phone != "" && email != "":
		return Target{}, &domain.ValidationError{Field: "phone", Reason: "conflict", Detail: "give a phone or an email, not both"}
	case phone != "":
		var b strings.Builder
		for i, r := range phone {
			switch {
			case r >= '0' && r <= '9':
				b.WriteRune(r)
			case r == '+' && i == 0:
				b.WriteRune(r)
			case r == ' ' || r == '-' || r == '.' || r == '(' || r == ')':
			default:
				return Target{}, &domain.ValidationError{Field: "phone", Reason: "bad_format", Detail: "digits with an optional leading +"}
			}
		}
		v := b.String()
		digits := len(strings.TrimPrefix(v, "+"))
		if digits < 6 || digits > 20 {
			return Target{}, &domain.ValidationError{Field: "phone", Reason: "bad_format", Detail: "6 to 20 digits"}
		}
		return Target{channel: ChannelSMS, value: v}, nil
	case email != "":
		v := strings.ToLower(strings.TrimSpace(email))
		at := strings.IndexByte(v, '@')
		if len(v) > 254 || at < 1 || at != strings.LastIndexByte(v, '@') || at == len(v)-1 || strings.ContainsAny(v, " \t\r\n") {
			return Target{}, &domain.ValidationError{Field: "email", Reason: "bad_format", Detail: "an e-mail address"}
		}
		return Target{channel: ChannelEmail, value: v}, nil
	}
	return Target{}, &domain.ValidationError{Field: "phone", Reason: "required", Detail: "a phone or an email"}
}

// Channel returns how codes reach the target.
func (t Target) Channel() Channel { return t.channel }

// IsZero reports whether t is the zero Target.
func (t Target) IsZero() bool { return t.value == "" }
