package rest

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/commands/pushsettings"
)

// PushSettings decides changes of users' device tokens and muted conversations, each reporting
// whether it changed anything; *pushsettings.Handler implements it. The push worker reads what
// the push-settings projection made of the events, so a change reaches it with the projection's
// lag.
type PushSettings interface {
	RegisterDevice(ctx context.Context, cmd pushsettings.RegisterDevice) (bool, error)
	RemoveDevice(ctx context.Context, cmd pushsettings.RemoveDevice) (bool, error)
	SetMuted(ctx context.Context, cmd pushsettings.SetMuted) (bool, error)
}

var _ PushSettings = (*pushsettings.Handler)(nil)

// pushMeta is the tracing metadata of a push settings change.
func pushMeta(ctx context.Context) pushsettings.Meta {
	return pushsettings.Meta{TraceID: RequestID(ctx)}
}

// Device is the data of a device registration answer.
type Device struct {
	DeviceID string `json:"device_id"`
	Provider string `json:"provider" enum:"jpush,webhook"`
	Platform string `json:"platform,omitempty"`
}

// PushChange is the data of a device removal or a mute change.
type PushChange struct {
	Changed bool `json:"changed" doc:"False when there was nothing to change"`
}

type deviceInput struct {
	IdempotencyHeader
	DeviceID string `path:"device_id" maxLength:"64" doc:"The client's device id, 1-64 characters"`
	Body     struct {
		Provider string `json:"provider" enum:"jpush,webhook" doc:"Which push provider the token belongs to"`
		Token    string `json:"token" maxLength:"256" doc:"The provider's registration id or device token"`
		Platform string `json:"platform,omitempty" maxLength:"16" doc:"ios, android, web, ..."`
	}
}

type deviceDelete struct {
	IdempotencyHeader
	DeviceID string `path:"device_id" maxLength:"64"`
}

type topicMuteInput struct {
	IdempotencyHeader
	Topic string `path:"topic" doc:"grp<id> or p2p<lo>_<hi>" example:"grp7"`
}

func (a *API) registerPush() {
	s := a.h.Push
	huma.Register(a.huma, a.build(op{id: "put-push-device", method: http.MethodPut, path: "/v1/im/push/devices/{device_id}",
		summary: "Register a device for offline reminders", tag: "push",
		desc: "Registers (or replaces) the caller's device token (push.device_registered.v1; nothing is recorded when the device holds that token already). " +
			"Offline reminders carry only type, topic, seq, tenant_id and a count, never message content. The push worker sees the device once the push-settings projection applied it."}),
		func(ctx context.Context, in *deviceInput) (*reply[Device], error) {
			p := principal(ctx)
			d := pushsettings.RegisterDevice{Tenant: p.Tenant, User: p.User, DeviceID: in.DeviceID, Provider: in.Body.Provider,
				Token: in.Body.Token, Platform: in.Body.Platform, Meta: pushMeta(ctx)}
			if _, err := s.RegisterDevice(ctx, d); err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			return respond(ctx, http.StatusOK, Device{DeviceID: d.DeviceID, Provider: d.Provider, Platform: d.Platform}), nil
		})
	huma.Register(a.huma, a.build(op{id: "delete-push-device", method: http.MethodDelete, path: "/v1/im/push/devices/{device_id}",
		summary: "Remove a device", tag: "push",
		desc: "push.device_removed.v1; changed is false for a device that is not registered (nothing is recorded)."}),
		func(ctx context.Context, in *deviceDelete) (*reply[PushChange], error) {
			p := principal(ctx)
			ok, err := s.RemoveDevice(ctx, pushsettings.RemoveDevice{Tenant: p.Tenant, User: p.User, DeviceID: in.DeviceID, Meta: pushMeta(ctx)})
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			return respond(ctx, http.StatusOK, PushChange{Changed: ok}), nil
		})
	mute := func(muted bool) func(context.Context, *topicMuteInput) (*reply[PushChange], error) {
		return func(ctx context.Context, in *topicMuteInput) (*reply[PushChange], error) {
			p := principal(ctx)
			topic, err := a.readableTopic(ctx, p, in.Topic)
			if err != nil {
				return nil, err
			}
			changed, err := s.SetMuted(ctx, pushsettings.SetMuted{Tenant: p.Tenant, User: p.User, Topic: topic, Muted: muted, Meta: pushMeta(ctx)})
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String(), "topic", topic.String())
			}
			return respond(ctx, http.StatusOK, PushChange{Changed: changed}), nil
		}
	}
	huma.Register(a.huma, a.build(op{id: "mute-topic", method: http.MethodPut, path: "/v1/im/push/mutes/{topic}",
		summary: "Mute a conversation's reminders", tag: "push", errs: []int{http.StatusForbidden, http.StatusNotFound},
		desc: "No offline reminder for the conversation unless the caller is @mentioned (push.conversation_muted.v1). Members and parties only. " +
			"changed is false when the conversation is muted already (nothing is recorded)."}), mute(true))
	huma.Register(a.huma, a.build(op{id: "unmute-topic", method: http.MethodDelete, path: "/v1/im/push/mutes/{topic}",
		summary: "Unmute a conversation's reminders", tag: "push", errs: []int{http.StatusForbidden, http.StatusNotFound},
		desc: "push.conversation_unmuted.v1; changed is false when the conversation is not muted (nothing is recorded)."}), mute(false))
}
