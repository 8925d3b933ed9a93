package pushsettings

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// RegisterDevice registers (or replaces) the token of one of User's devices.
type RegisterDevice struct {
	Tenant   domain.TenantID
	User     domain.UserID
	DeviceID string
	Provider string // domain.PushProviderJPush or domain.PushProviderWebhook
	Token    string // personal data: never logged
	Platform string
	Meta     Meta
}

// RegisterDevice appends push.device_registered.v1 unless the device is registered already with
// the same provider, token and platform, and reports whether it appended. Errors: a
// *domain.ValidationError per bad field (nothing appended); domain.ErrConcurrency after losing
// the race for the device's stream repeatedly; domain.ErrRetryable when PostgreSQL failed.
func (h *Handler) RegisterDevice(ctx context.Context, cmd RegisterDevice) (changed bool, err error) {
	p := domain.PushDeviceRegistered{User: cmd.User, DeviceID: cmd.DeviceID, Provider: cmd.Provider, Token: cmd.Token,
		Platform: cmd.Platform}
	if err := p.Validate(); err != nil {
		return false, err
	}
	return h.execute(ctx, cmd.Tenant, cmd.User, domain.PushDeviceStreamID(cmd.User, cmd.DeviceID), cmd.Meta,
		func(last domain.Envelope, found bool, now time.Time) (decision, error) {
			if found && last.EventType == domain.EventPushDeviceRegistered {
				var cur domain.PushDeviceRegistered
				if err := last.Decode(&cur); err != nil {
					return decision{}, err
				}
				if cur.SamePushDevice(p) {
					return decision{}, nil
				}
			}
			p.RegisteredAt = now
			return decision{domain.EventPushDeviceRegistered, p}, nil
		})
}

// RemoveDevice removes one of User's devices: it gets no more reminders.
type RemoveDevice struct {
	Tenant   domain.TenantID
	User     domain.UserID
	DeviceID string
	Meta     Meta
}

// RemoveDevice appends push.device_removed.v1 when the device is registered (by its stream, or by
// a row older than the log) and reports whether it appended: false for a device never registered
// or removed already. Errors as RegisterDevice.
func (h *Handler) RemoveDevice(ctx context.Context, cmd RemoveDevice) (changed bool, err error) {
	if cmd.User <= 0 {
		return false, &domain.ValidationError{Field: "user_id", Reason: "bad_format", Detail: "a positive user id"}
	}
	if err := domain.ValidatePushDeviceID(cmd.DeviceID); err != nil {
		return false, err
	}
	return h.execute(ctx, cmd.Tenant, cmd.User, domain.PushDeviceStreamID(cmd.User, cmd.DeviceID), cmd.Meta,
		func(last domain.Envelope, found bool, now time.Time) (decision, error) {
			registered := found && last.EventType == domain.EventPushDeviceRegistered
			if !found && h.prelog != nil {
				var err error
				if registered, err = h.prelog.PreLogDevice(ctx, cmd.Tenant, cmd.User, cmd.DeviceID); err != nil {
					return decision{}, err
				}
			}
			if !registered {
				return decision{}, nil
			}
			return decision{domain.EventPushDeviceRemoved, domain.PushDeviceRemoved{User: cmd.User, DeviceID: cmd.DeviceID, RemovedAt: now}}, nil
		})
}
