package rest

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/pushdb"
)

// PushSettings keeps users' device tokens and muted conversations; *pushdb.Store implements it.
type PushSettings interface {
	PutDevice(ctx context.Context, tenant domain.TenantID, d pushdb.Device) error
	DeleteDevice(ctx context.Context, tenant domain.TenantID, uid domain.UserID, deviceID string) (bool, error)
	SetMuted(ctx context.Context, tenant domain.TenantID, topic domain.Topic, uid domain.UserID, muted bool) error
}

var _ PushSettings = (*pushdb.Store)(nil)

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
		desc: "Registers (or replaces) the caller's device token. Offline reminders carry only type, topic, seq, tenant_id and a count, never message content."}),
		func(ctx context.Context, in *deviceInput) (*reply[Device], error) {
			p := principal(ctx)
			d := pushdb.Device{UserID: p.User, DeviceID: in.DeviceID, Provider: in.Body.Provider, Token: in.Body.Token, Platform: in.Body.Platform}
			if err := s.PutDevice(ctx, p.Tenant, d); err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			return respond(ctx, http.StatusOK, Device{DeviceID: d.DeviceID, Provider: d.Provider, Platform: d.Platform}), nil
		})
	huma.Register(a.huma, a.build(op{id: "delete-push-device", method: http.MethodDelete, path: "/v1/im/push/devices/{device_id}",
		summary: "Remove a device", tag: "push"}),
		func(ctx context.Context, in *deviceDelete) (*reply[PushChange], error) {
			p := principal(ctx)
			ok, err := s.DeleteDevice(ctx, p.Tenant, p.User, in.DeviceID)
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
			if err := s.SetMuted(ctx, p.Tenant, topic, p.User, muted); err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String(), "topic", topic.String())
			}
			return respond(ctx, http.StatusOK, PushChange{Changed: true}), nil
		}
	}
	huma.Register(a.huma, a.build(op{id: "mute-topic", method: http.MethodPut, path: "/v1/im/push/mutes/{topic}",
		summary: "Mute a conversation's reminders", tag: "push", errs: []int{http.StatusForbidden, http.StatusNotFound},
		desc: "No offline reminder for the conversation unless the caller is @mentioned. Members and parties only."}), mute(true))
	huma.Register(a.huma, a.build(op{id: "unmute-topic", method: http.MethodDelete, path: "/v1/im/push/mutes/{topic}",
		summary: "Unmute a conversation's reminders", tag: "push", errs: []int{http.StatusForbidden, http.StatusNotFound}}), mute(false))
}
