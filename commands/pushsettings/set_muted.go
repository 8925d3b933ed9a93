package pushsettings

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// SetMuted mutes (Muted true) or unmutes a conversation's offline reminders for User. Whether User
// may read Topic is the caller's check.
type SetMuted struct {
	Tenant domain.TenantID
	User   domain.UserID
	Topic  domain.Topic
	Muted  bool
	Meta   Meta
}

// SetMuted appends push.conversation_muted.v1 (or unmuted) when the conversation is not in that
// state yet (a conversation never muted is unmuted; one muted by a row older than the log is
// muted) and reports whether it appended. Errors: a
// *domain.ValidationError for a bad user or topic; otherwise as RegisterDevice.
func (h *Handler) SetMuted(ctx context.Context, cmd SetMuted) (changed bool, err error) {
	if cmd.User <= 0 {
		return false, &domain.ValidationError{Field: "user_id", Reason: "bad_format", Detail: "a positive user id"}
	}
	if cmd.Topic.String() == "" {
		return false, &domain.ValidationError{Field: "topic", Reason: "required"}
	}
	return h.execute(ctx, cmd.Tenant, cmd.User, domain.PushMuteStreamID(cmd.User, cmd.Topic), cmd.Meta,
		func(last domain.Envelope, found bool, now time.Time) (decision, error) {
			muted := found && last.EventType == domain.EventPushConversationMuted
			if !found && h.prelog != nil {
				var err error
				if muted, err = h.prelog.PreLogMute(ctx, cmd.Tenant, cmd.User, cmd.Topic); err != nil {
					return decision{}, err
				}
			}
			switch {
			case muted == cmd.Muted:
				return decision{}, nil
			case cmd.Muted:
				return decision{domain.EventPushConversationMuted,
					domain.PushConversationMuted{User: cmd.User, Topic: cmd.Topic.String(), MutedAt: now}}, nil
			default:
				return decision{domain.EventPushConversationUnmuted,
					domain.PushConversationUnmuted{User: cmd.User, Topic: cmd.Topic.String(), UnmutedAt: now}}, nil
			}
		})
}
