package domain

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// EventType is an explicit, versioned event name such as "message.group.sent.v1". It is never
// derived from a Go type name and a published name is never renamed.
type EventType string

// Actor is who caused an event.
type Actor struct {
	Type string `json:"type"` // "user", "admin", "system"
	ID   string `json:"id"`
	// KeyID names the producer key an admin command was verified with, on the events the command
	// appended and on its result; empty for every other actor (users, the platform itself, an
	// unsigned command on the embedded broker).
	KeyID string `json:"key_id,omitempty"`
}

// Actor types.
const (
	ActorUser   = "user"
	ActorAdmin  = "admin"
	ActorSystem = "system"
)

// Envelope is one stored event with its metadata (DESIGN §3). In the event store the fields are
// columns and Payload is jsonb; on Kafka the whole envelope is the JSON message value.
// 64-bit numbers are JSON strings.
type Envelope struct {
	EventID        uuid.UUID       `json:"event_id"`
	TraceID        string          `json:"trace_id,omitempty"`
	CorrelationID  string          `json:"correlation_id,omitempty"`
	CausationID    string          `json:"causation_id,omitempty"`
	ParentEventID  *uuid.UUID      `json:"parent_event_id,omitempty"`
	TenantID       TenantID        `json:"tenant_id"`
	SourceService  string          `json:"source_service,omitempty"`
	TargetService  string          `json:"target_service,omitempty"`
	EventType      EventType       `json:"event_type"`
	BizType        string          `json:"biz_type,omitempty"`
	BizID          string          `json:"biz_id,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Version        int             `json:"version"`
	OccurredAt     time.Time       `json:"occurred_at"`
	Actor          Actor           `json:"actor"`
	StreamID       string          `json:"stream_id"`
	StreamVersion  int64           `json:"stream_version,string"`
	Position       int64           `json:"position,string"` // global order, set by the store
	Payload        json.RawMessage `json:"payload"`
}

// SourceService is the source_service of events this process writes.
const SourceService = "imledger"

// NewEnvelope builds an envelope with a fresh UUIDv7 event id, the current UTC time and the
// payload marshalled to JSON. Schema version is taken from the event type's registration.
func NewEnvelope(tenant TenantID, streamID string, streamVersion int64, typ EventType, actor Actor, payload any) (Envelope, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Envelope{}, err
	}
	return NewEnvelopeWithID(id, tenant, streamID, streamVersion, typ, actor, payload)
}

// NewEnvelopeWithID is NewEnvelope with a caller-chosen event id. Old versions of an event type
// are read, never written: a superseded type fails with ErrInvalid (reason superseded).
func NewEnvelopeWithID(id uuid.UUID, tenant TenantID, streamID string, streamVersion int64, typ EventType, actor Actor, payload any) (Envelope, error) {
	if tenant.IsZero() {
		return Envelope{}, invalid("tenant_id", "required", "")
	}
	if streamID == "" {
		return Envelope{}, invalid("stream_id", "required", "")
	}
	if streamVersion <= 0 {
		return Envelope{}, invalid("stream_version", "bad_format", "positive")
	}
	info, ok := LookupEventType(typ)
	if !ok {
		return Envelope{}, invalid("event_type", "unknown", string(typ))
	}
	if cur := CurrentType(typ); cur != typ {
		return Envelope{}, invalid("event_type", "superseded", "write "+string(cur)+", not "+string(typ))
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return Envelope{}, invalid("payload", "bad_json", err.Error())
	}
	return Envelope{
		EventID:       id,
		TenantID:      tenant,
		SourceService: SourceService,
		EventType:     typ,
		BizType:       info.BizType,
		Version:       info.SchemaVersion,
		OccurredAt:    time.Now().UTC(),
		Actor:         actor,
		StreamID:      streamID,
		StreamVersion: streamVersion,
		Payload:       raw,
	}, nil
}

// Decode unmarshals the payload into v, as json.Unmarshal does. A *MessageSent in its canonical
// form is read by a scanner of its own, several times faster (the message projectors and
// rebuilds decode every message); any other payload, and any MessageSent the scanner does not
// take, goes to json.Unmarshal.
func (e Envelope) Decode(v any) error {
	if m, ok := v.(*MessageSent); ok && m != nil && decodeMessageSent(e.Payload, m) {
		return nil
	}
	return json.Unmarshal(e.Payload, v)
}
