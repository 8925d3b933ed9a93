package domain

import (
	"errors"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Push settings event types (Category business, topic im.business.event): the devices a user
// registered for offline reminders and the conversations the user muted. Each device and each
// mute has a stream of its own (PushDeviceStreamID, PushMuteStreamID) whose last event is its
// current state, so deciding a change reads one event.
const (
	EventPushDeviceRegistered    EventType = "push.device_registered.v1"
	EventPushDeviceRemoved       EventType = "push.device_removed.v1"
	EventPushConversationMuted   EventType = "push.conversation_muted.v1"
	EventPushConversationUnmuted EventType = "push.conversation_unmuted.v1"
)

// BizTypePush is the biz_type of push settings events.
const BizTypePush = "push"

// Providers a device may name.
const (
	PushProviderJPush   = "jpush"
	PushProviderWebhook = "webhook"
)

// PushDeviceStreamID is the stream of one device of user. Its ConversationKey is the user's
// stream id ("user:<uid>"), so a user's push settings stay in order on one Kafka partition.
func PushDeviceStreamID(user UserID, deviceID string) string {
	return ProfileStreamID(user) + "/push/device/" + deviceID
}

// PushMuteStreamID is the stream of user's mute of topic; its ConversationKey is the user's.
func PushMuteStreamID(user UserID, topic Topic) string {
	return ProfileStreamID(user) + "/push/mute/" + topic.String()
}

// PushDeviceRegistered is the payload of push.device_registered.v1: User registered (or
// replaced) the token of one device. Token is the provider's registration id or device token:
// personal data, never logged.
type PushDeviceRegistered struct {
	User         UserID    `json:"user"`
	DeviceID     string    `json:"device_id"`
	Provider     string    `json:"provider"` // jpush or webhook
	Token        string    `json:"token"`
	Platform     string    `json:"platform,omitempty"`
	RegisteredAt time.Time `json:"registered_at"`
}

// Validate checks the device's fields against what the read model holds: a *ValidationError per
// bad field, joined. Text that is not UTF-8 or holds a control character (U+0000 included) is
// reason bad_text: MySQL would refuse the one and keep the other, unreadable.
func (d PushDeviceRegistered) Validate() error {
	var errs []error
	if d.User <= 0 {
		errs = append(errs, &ValidationError{Field: "user_id", Reason: "bad_format", Detail: "a positive user id"})
	}
	errs = append(errs, ValidatePushDeviceID(d.DeviceID))
	if d.Provider != PushProviderJPush && d.Provider != PushProviderWebhook {
		errs = append(errs, &ValidationError{Field: "provider", Reason: "bad_value", Detail: "jpush or webhook"})
	}
	if badText(d.Token) {
		errs = append(errs, &ValidationError{Field: "token", Reason: ReasonBadText, Detail: "UTF-8 without control characters"})
	} else if d.Token == "" || len(d.Token) > 256 {
		errs = append(errs, &ValidationError{Field: "token", Reason: "bad_format", Detail: "1-256 characters"})
	}
	if badText(d.Platform) {
		errs = append(errs, &ValidationError{Field: "platform", Reason: ReasonBadText, Detail: "UTF-8 without control characters"})
	} else if len(d.Platform) > 16 {
		errs = append(errs, &ValidationError{Field: "platform", Reason: "too_long", Detail: "at most 16 characters"})
	}
	return errors.Join(errs...)
}

// ValidatePushDeviceID checks a device id: 1-64 bytes of UTF-8 without control characters or
// spaces. It returns nil or a *ValidationError of field device_id.
func ValidatePushDeviceID(id string) error {
	switch {
	case badText(id):
		return &ValidationError{Field: "device_id", Reason: ReasonBadText, Detail: "UTF-8 without control characters"}
	case id == "" || len(id) > 64 || strings.ContainsAny(id, " \t\r\n"):
		return &ValidationError{Field: "device_id", Reason: "bad_format", Detail: "1-64 characters, no spaces"}
	}
	return nil
}

// badText reports whether s is not UTF-8 or holds a control character.
func badText(s string) bool {
	return !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl)
}

// SamePushDevice reports whether d registers the same token, provider and platform as o: a
// registration that changes nothing.
func (d PushDeviceRegistered) SamePushDevice(o PushDeviceRegistered) bool {
	return d.User == o.User && d.DeviceID == o.DeviceID && d.Provider == o.Provider && d.Token == o.Token && d.Platform == o.Platform
}

// PushDeviceRemoved is the payload of push.device_removed.v1: the device gets no more reminders.
type PushDeviceRemoved struct {
	User      UserID    `json:"user"`
	DeviceID  string    `json:"device_id"`
	RemovedAt time.Time `json:"removed_at"`
}

// PushConversationMuted is the payload of push.conversation_muted.v1: no offline reminder of
// Topic reaches User unless User is @mentioned.
type PushConversationMuted struct {
	User    UserID    `json:"user"`
	Topic   string    `json:"topic"`
	MutedAt time.Time `json:"muted_at"`
}

// PushConversationUnmuted is the payload of push.conversation_unmuted.v1.
type PushConversationUnmuted struct {
	User      UserID    `json:"user"`
	Topic     string    `json:"topic"`
	UnmutedAt time.Time `json:"unmuted_at"`
}
