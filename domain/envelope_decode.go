package domain

import (
	"encoding/json"

	"github.com/google/uuid"
)

// DecodeEnvelope parses the wire JSON of an envelope (what AppendJSON writes) as json.Unmarshal
// into an Envelope would, with the same result and the same errors. An envelope in its canonical
// form is read by a one-pass scanner, several times faster (every projector decodes every record
// it consumes); any other input goes to json.Unmarshal.
func DecodeEnvelope(data []byte) (Envelope, error) {
	var e Envelope
	if decodeEnvelopeFast(data, &e) {
		return e, nil
	}
	e = Envelope{}
	err := json.Unmarshal(data, &e)
	return e, err
}

// decodeEnvelopeFast decodes the canonical form of an envelope into e (zero on entry) and reports
// true; false for anything else, with e then undefined.
func decodeEnvelopeFast(data []byte, e *Envelope) bool {
	s := scanner{contentScan{b: data}}
	return s.object(func(key []byte) (uint32, bool) { return decodeEnvelopeField(&s, key, e) }) && s.end()
}

// decodeEnvelopeField decodes the value of key into e and returns the key's bit.
func decodeEnvelopeField(s *scanner, key []byte, e *Envelope) (uint32, bool) {
	switch string(key) {
	case "event_id":
		id, ok := s.uuid()
		e.EventID = id
		return 1 << 0, ok
	case "trace_id":
		return 1 << 1, s.str(&e.TraceID)
	case "correlation_id":
		return 1 << 2, s.str(&e.CorrelationID)
	case "causation_id":
		return 1 << 3, s.str(&e.CausationID)
	case "parent_event_id":
		id, ok := s.uuid()
		e.ParentEventID = &id
		return 1 << 4, ok
	case "tenant_id":
		b, ok := s.plainString()
		if !ok {
			return 0, false
		}
		t, err := NewTenantID(string(b))
		e.TenantID = t
		return 1 << 5, err == nil
	case "source_service":
		return 1 << 6, s.str(&e.SourceService)
	case "target_service":
		return 1 << 7, s.str(&e.TargetService)
	case "event_type":
		b, ok := s.plainString()
		e.EventType = EventType(b)
		return 1 << 8, ok
	case "biz_type":
		return 1 << 9, s.str(&e.BizType)
	case "biz_id":
		return 1 << 10, s.str(&e.BizID)
	case "idempotency_key":
		return 1 << 11, s.str(&e.IdempotencyKey)
	case "version":
		n, ok := s.jsonInt()
		e.Version = int(n)
		return 1 << 12, ok
	case "occurred_at":
		return 1 << 13, s.time(&e.OccurredAt)
	case "actor":
		return 1 << 14, s.actor(&e.Actor)
	case "stream_id":
		return 1 << 15, s.str(&e.StreamID)
	case "stream_version":
		n, ok := s.quotedInt()
		e.StreamVersion = n
		return 1 << 16, ok
	case "position":
		n, ok := s.quotedInt()
		e.Position = n
		return 1 << 17, ok
	case "payload":
		b, ok := s.value()
		if !ok || string(b) == "null" {
			return 0, false
		}
		e.Payload = append(json.RawMessage(nil), b...)
		return 1 << 18, true
	}
	return 0, false
}

// actor decodes an envelope's actor object into a.
func (s *scanner) actor(a *Actor) bool {
	return s.object(func(key []byte) (uint32, bool) {
		switch string(key) {
		case "type":
			return 1, s.str(&a.Type)
		case "id":
			return 2, s.str(&a.ID)
		case "key_id":
			return 4, s.str(&a.KeyID)
		}
		return 0, false
	})
}

// uuid reads a UUID as its UnmarshalText does from a JSON string.
func (s *scanner) uuid() (uuid.UUID, bool) {
	b, ok := s.plainString()
	if !ok {
		return uuid.UUID{}, false
	}
	id, err := uuid.ParseBytes(b)
	return id, err == nil
}
