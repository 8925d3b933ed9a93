package domain

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// CategoryConfig is the category of tenant lifecycle and settings events; the relay publishes
// them on im.config.event, which every node follows to refresh its tenant cache.
const CategoryConfig Category = "config"

// Tenant event types (Category config). Each tenant has one lifecycle stream, TenantStreamID.
const (
	EventTenantProvisioned EventType = "tenant.provisioned.v1"
	EventTenantSuspended   EventType = "tenant.suspended.v1"
	EventTenantResumed     EventType = "tenant.resumed.v1"
	EventTenantConfigSet   EventType = "tenant.config_set.v1"
	// EventTenantRetentionApplied records that the retention job removed the tenant's message
	// history older than a horizon from every read model (TenantRetentionApplied).
	EventTenantRetentionApplied EventType = "tenant.retention_applied.v1"
)

// EventTenantBroadcastSent records a system message an administrator sent to every user of a
// tenant (Category business, stream TenantBroadcastStreamID).
const EventTenantBroadcastSent EventType = "tenant.broadcast_sent.v1"

// BizTypeTenant is the biz_type of tenant events.
const BizTypeTenant = "tenant"

// TenantStreamID is the stream of a tenant's lifecycle and settings. The tenant is the
// envelope's tenant_id.
const TenantStreamID = "tenant"

// TenantBroadcastStreamID is the stream of a tenant's broadcast system messages. Its
// ConversationKey is TenantStreamID, so broadcasts keep their order with the lifecycle.
const TenantBroadcastStreamID = "tenant/broadcasts"

// Stable refusal reasons of the tenant registry and of every entry point that checks it.
const (
	// ReasonTenantNotFound: the tenant was never provisioned.
	ReasonTenantNotFound = "tenant_not_found"
	// ReasonTenantSuspended: the tenant is suspended; nothing of it is served until it resumes.
	ReasonTenantSuspended = "tenant_suspended"
	// ReasonRegistrationClosed: the tenant's registration_open setting is false.
	ReasonRegistrationClosed = "registration_closed"
)

// TenantStatus is the lifecycle state of a provisioned tenant.
type TenantStatus string

// The tenant statuses.
const (
	TenantStatusActive    TenantStatus = "active"
	TenantStatusSuspended TenantStatus = "suspended"
)

// MaxTenantContentBytes is the highest max_content_bytes a tenant may set. A node still applies
// its own send.max_content_bytes when that is lower.
const MaxTenantContentBytes = 1 << 20

// MaxRetentionMonths is the longest retention_months a tenant may set (100 years).
const MaxRetentionMonths = 1200

// TenantSettings are a tenant's settings (seed 004 §7.1). A nil field is not set: the node's
// configured default applies. Build changes with ApplyTenantSettings.
type TenantSettings struct {
	// RegistrationOpen: false refuses new registrations (403 registration_closed). Default true.
	RegistrationOpen *bool `json:"registration_open,omitempty"`
	// MaxContentBytes limits a sent message's serialized content, 1..MaxTenantContentBytes;
	// the node's send.max_content_bytes is the ceiling.
	MaxContentBytes *int `json:"max_content_bytes,omitempty"`
	// RegisterRequiresCode: true makes registration need a verification code of scene
	// register sent to the phone or e-mail given with it. Default false.
	RegisterRequiresCode *bool `json:"register_requires_code,omitempty"`
	// LoginRequiresCode: true makes login need a verification code of scene login besides the
	// password. Default false.
	LoginRequiresCode *bool `json:"login_requires_code,omitempty"`
	// RateLimits override the node's per-minute rate limits by kind (0 turns one off); config_set
	// replaces the whole map.
	RateLimits RateLimits `json:"rate_limits,omitempty"`
	// RetentionMonths keeps message history for this many whole calendar months before the
	// current one (1..MaxRetentionMonths); unset keeps it for ever. See RetentionHorizon.
	RetentionMonths *int `json:"retention_months,omitempty"`
}

// TenantSettingKeys are the names of the settings, as config_set takes them.
var TenantSettingKeys = []string{"registration_open", "max_content_bytes", "register_requires_code",
	"login_requires_code", "rate_limits", "retention_months"}

// RegisterCode reports whether registration needs a verification code.
func (s TenantSettings) RegisterCode() bool {
	return s.RegisterRequiresCode != nil && *s.RegisterRequiresCode
}

// LoginCode reports whether login needs a verification code.
func (s TenantSettings) LoginCode() bool { return s.LoginRequiresCode != nil && *s.LoginRequiresCode }

// Registration reports whether registration is open (true unless set to false).
func (s TenantSettings) Registration() bool { return s.RegistrationOpen == nil || *s.RegistrationOpen }

// ContentLimit returns the tenant's content limit capped by nodeLimit; nodeLimit when unset.
func (s TenantSettings) ContentLimit(nodeLimit int) int {
	if nodeLimit <= 0 {
		nodeLimit = DefaultMaxContentBytes
	}
	if s.MaxContentBytes == nil || *s.MaxContentBytes >= nodeLimit {
		return nodeLimit
	}
	return *s.MaxContentBytes
}

// RetentionHorizon returns the start of the oldest month whose messages the tenant keeps at now
// (UTC): with retention_months N, the first day of the month N months before now's month, so
// N whole months and the current one are kept. ok is false when history is kept for ever.
func (s TenantSettings) RetentionHorizon(now time.Time) (horizon time.Time, ok bool) {
	if s.RetentionMonths == nil || *s.RetentionMonths <= 0 {
		return time.Time{}, false
	}
	return MonthStart(now).AddDate(0, -*s.RetentionMonths, 0), true
}

// MonthStart returns the first instant of t's calendar month in UTC.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// Equal reports whether s and o set the same values.
func (s TenantSettings) Equal(o TenantSettings) bool {
	return eqPtr(s.RegistrationOpen, o.RegistrationOpen) && eqPtr(s.MaxContentBytes, o.MaxContentBytes) &&
		eqPtr(s.RegisterRequiresCode, o.RegisterRequiresCode) && eqPtr(s.LoginRequiresCode, o.LoginRequiresCode) &&
		s.RateLimits.equal(o.RateLimits) && eqPtr(s.RetentionMonths, o.RetentionMonths)
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// ApplyTenantSettings returns base with changes applied: each key of changes is a setting name
// with its new JSON value, or null to unset it. Unknown keys and bad values are
// *ValidationError with the key as field and reason unknown or bad_format (out_of_range for a
// content limit outside 1..MaxTenantContentBytes).
func ApplyTenantSettings(base TenantSettings, changes map[string]json.RawMessage) (TenantSettings, error) {
	out := base
	if len(changes) == 0 {
		return TenantSettings{}, invalid("settings", "required", "at least one of "+strings.Join(TenantSettingKeys, ", "))
	}
	for k, raw := range changes {
		unset := len(raw) == 0 || string(raw) == "null"
		switch k {
		case "registration_open", "register_requires_code", "login_requires_code":
			field := map[string]**bool{"registration_open": &out.RegistrationOpen,
				"register_requires_code": &out.RegisterRequiresCode, "login_requires_code": &out.LoginRequiresCode}[k]
			if unset {
				*field = nil
				continue
			}
			var v bool
			if err := json.Unmarshal(raw, &v); err != nil {
				return TenantSettings{}, invalid(k, "bad_format", "true or false")
			}
			*field = &v
		case "rate_limits":
			if unset {
				out.RateLimits = nil
				continue
			}
			var v RateLimits
			if err := json.Unmarshal(raw, &v); err != nil {
				return TenantSettings{}, invalid(k, "bad_format", "an object of per-minute limits by kind")
			}
			if err := checkRateLimits(v); err != nil {
				return TenantSettings{}, err
			}
			out.RateLimits = v
		case "max_content_bytes", "retention_months":
			field, limit, unit := &out.MaxContentBytes, MaxTenantContentBytes, "a whole number of bytes"
			if k == "retention_months" {
				field, limit, unit = &out.RetentionMonths, MaxRetentionMonths, "a whole number of months"
			}
			if unset {
				*field = nil
				continue
			}
			var v int
			if err := json.Unmarshal(raw, &v); err != nil {
				return TenantSettings{}, invalid(k, "bad_format", unit)
			}
			if v < 1 || v > limit {
				return TenantSettings{}, invalid(k, "out_of_range", "1.."+strconv.Itoa(limit))
			}
			*field = &v
		default:
			return TenantSettings{}, invalid(k, "unknown", "a tenant setting: "+strings.Join(TenantSettingKeys, ", "))
		}
	}
	return out, nil
}

// TenantProvisioned is the payload of tenant.provisioned.v1, the first event of a tenant.
type TenantProvisioned struct {
	Settings      TenantSettings `json:"settings"`
	ProvisionedAt time.Time      `json:"provisioned_at"`
}

// TenantSuspended is the payload of tenant.suspended.v1. Tokens of the tenant issued before
// SuspendedAt stay refused after a resume: the tenant's users log in again.
type TenantSuspended struct {
	Reason      string    `json:"reason,omitempty"`
	SuspendedAt time.Time `json:"suspended_at"`
}

// TenantResumed is the payload of tenant.resumed.v1.
type TenantResumed struct {
	ResumedAt time.Time `json:"resumed_at"`
}

// TenantConfigSet is the payload of tenant.config_set.v1: the whole settings after the change
// and the keys that changed.
type TenantConfigSet struct {
	Settings TenantSettings `json:"settings"`
	Changed  []string       `json:"changed"`
	SetAt    time.Time      `json:"set_at"`
}

// TenantRetentionApplied is the payload of tenant.retention_applied.v1: the retention job removed
// every message of the tenant that occurred before Horizon from the read models (MySQL and
// Redis) and destroyed its month keys before it. Projections and rebuilds skip message events
// older than the latest horizon from then on, so a rebuild never brings that history back.
// Horizon only moves forward.
type TenantRetentionApplied struct {
	Horizon   time.Time `json:"horizon"`
	Months    int       `json:"months"`
	AppliedAt time.Time `json:"applied_at"`
}

// TenantBroadcastSent is the payload of tenant.broadcast_sent.v1: a system message for every
// user of the tenant, delivered to the sessions online when it was sent.
type TenantBroadcastSent struct {
	Content json.RawMessage `json:"content"`
	SentAt  time.Time       `json:"sent_at"`
}

// TenantState is a tenant folded from its stream (TenantStreamID).
type TenantState struct {
	tenant    TenantID
	version   int64
	status    TenantStatus
	settings  TenantSettings
	notBefore time.Time
	horizon   time.Time
	created   time.Time
	updated   time.Time
}

// NewTenantState returns the state of a tenant with no events (not provisioned).
func NewTenantState(tenant TenantID) (TenantState, error) {
	if tenant.IsZero() {
		return TenantState{}, invalid("tenant_id", "required", "")
	}
	return TenantState{tenant: tenant}, nil
}

// Apply folds the next event of the tenant stream; ErrStreamMismatch when it does not fit.
func (s *TenantState) Apply(env Envelope) error {
	p, err := decodePayload(env, s.tenant, TenantStreamID, s.version)
	if err != nil {
		return err
	}
	switch e := p.(type) {
	case *TenantProvisioned:
		s.status, s.settings, s.created, s.updated = TenantStatusActive, e.Settings, e.ProvisionedAt, e.ProvisionedAt
	case *TenantSuspended:
		s.status, s.updated = TenantStatusSuspended, e.SuspendedAt
		if e.SuspendedAt.After(s.notBefore) {
			s.notBefore = e.SuspendedAt
		}
	case *TenantResumed:
		s.status, s.updated = TenantStatusActive, e.ResumedAt
	case *TenantConfigSet:
		s.settings, s.updated = e.Settings, e.SetAt
	case *TenantRetentionApplied:
		if e.Horizon.After(s.horizon) {
			s.horizon = e.Horizon.UTC()
		}
	default:
		return unknownEvent(TenantStreamID, p)
	}
	s.version = env.StreamVersion
	return nil
}

// Tenant returns the tenant id.
func (s TenantState) Tenant() TenantID { return s.tenant }

// Version returns the stream version folded so far.
func (s TenantState) Version() int64 { return s.version }

// Exists reports whether the tenant was provisioned.
func (s TenantState) Exists() bool { return s.version > 0 }

// Status returns the lifecycle status; empty before provisioning.
func (s TenantState) Status() TenantStatus { return s.status }

// Settings returns the tenant's settings.
func (s TenantState) Settings() TenantSettings { return s.settings }

// NotBefore returns the time before which the tenant's tokens are refused (its last suspension).
func (s TenantState) NotBefore() time.Time { return s.notBefore }

// RetainedBefore returns the tenant's retention horizon: its messages that occurred before it were
// removed from the read models; zero when retention never ran.
func (s TenantState) RetainedBefore() time.Time { return s.horizon }

// CreatedAt returns when the tenant was provisioned.
func (s TenantState) CreatedAt() time.Time { return s.created }

// UpdatedAt returns when the tenant last changed.
func (s TenantState) UpdatedAt() time.Time { return s.updated }

func (s TenantState) event(typ EventType, payload any) PendingEvent {
	return PendingEvent{StreamID: TenantStreamID, ExpectedVersion: s.version, Type: typ, Payload: payload}
}

// Provision decides tenant.provisioned.v1 for a tenant that does not exist yet; an existing
// tenant decides nothing.
func (s TenantState) Provision(settings TenantSettings, now time.Time) []PendingEvent {
	if s.Exists() {
		return nil
	}
	return []PendingEvent{s.event(EventTenantProvisioned, &TenantProvisioned{Settings: settings, ProvisionedAt: now.UTC()})}
}

// Suspend decides tenant.suspended.v1. Refusal: tenant_not_found; a suspended tenant decides
// nothing.
func (s TenantState) Suspend(reason string, now time.Time) ([]PendingEvent, error) {
	if !s.Exists() {
		return nil, Deny(ReasonTenantNotFound)
	}
	if err := checkText("reason", reason, false, MaxReasonLen, false); err != nil {
		return nil, err
	}
	if s.status == TenantStatusSuspended {
		return nil, nil
	}
	return []PendingEvent{s.event(EventTenantSuspended, &TenantSuspended{Reason: reason, SuspendedAt: now.UTC()})}, nil
}

// Resume decides tenant.resumed.v1. Refusal: tenant_not_found; an active tenant decides nothing.
func (s TenantState) Resume(now time.Time) ([]PendingEvent, error) {
	if !s.Exists() {
		return nil, Deny(ReasonTenantNotFound)
	}
	if s.status == TenantStatusActive {
		return nil, nil
	}
	return []PendingEvent{s.event(EventTenantResumed, &TenantResumed{ResumedAt: now.UTC()})}, nil
}

// SetConfig decides tenant.config_set.v1 with changes applied as ApplyTenantSettings does.
// Refusal: tenant_not_found; bad changes are *ValidationError; unchanged settings decide nothing.
func (s TenantState) SetConfig(changes map[string]json.RawMessage, now time.Time) ([]PendingEvent, error) {
	if !s.Exists() {
		return nil, Deny(ReasonTenantNotFound)
	}
	next, err := ApplyTenantSettings(s.settings, changes)
	if err != nil {
		return nil, err
	}
	if next.Equal(s.settings) {
		return nil, nil
	}
	var changed []string
	for _, k := range TenantSettingKeys {
		if _, ok := changes[k]; ok {
			changed = append(changed, k)
		}
	}
	return []PendingEvent{s.event(EventTenantConfigSet, &TenantConfigSet{Settings: next, Changed: changed, SetAt: now.UTC()})}, nil
}

// ApplyRetention decides tenant.retention_applied.v1 recording horizon, after the retention job
// removed the tenant's history from before it. A tenant never provisioned, or whose recorded
// horizon is not before horizon, decides nothing: the horizon only moves forward.
func (s TenantState) ApplyRetention(horizon, now time.Time) []PendingEvent {
	if !s.Exists() || !horizon.After(s.horizon) {
		return nil
	}
	months := 0
	if s.settings.RetentionMonths != nil {
		months = *s.settings.RetentionMonths
	}
	return []PendingEvent{s.event(EventTenantRetentionApplied, &TenantRetentionApplied{Horizon: horizon.UTC(),
		Months: months, AppliedAt: now.UTC()})}
}
