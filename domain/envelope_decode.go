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
	s := scanner{data: data}
	if !s.consume('{') {
		return false
	}
	var seen uint32
	if !s.consume('}') {
		for {
			key, ok := s.plainString()
			if !ok || !s.consume(':') {
				return false
			}
			bit, ok := decodeEnvelopeField(&s, string(key), e)
			if !ok || seen&bit != 0 {
				return false
			}
			seen |= bit
			if s.consume('}') {
				break
			}
			if !s.consume(',') {
				return false
			}
		}
	}
	return s.end()
}

// decodeEnvelopeField decodes the value of key into e and returns the key's bit.
func decodeEnvelopeField(s *scanner, key string, e *Envelope) (uint32, bool) {
	str := func(bit uint32, into *string) (uint32, bool) {
		b, ok := s.plainString()
		*into = string(b)
		return bit, ok
	}
	switch key {
	case "event_id":
		id, ok := s.uuid()
		e.EventID = id
		return 1 << 0, ok
	case "trace_id":
		return str(1<<1, &e.TraceID)
	case "correlation_id":
		return str(1<<2, &e.CorrelationID)
	case "causation_id":
		return str(1<<3, &e.CausationID)
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
		return str(1<<6, &e.SourceService)
	case "target_service":
		return str(1<<7, &e.TargetService)
	case "event_type":
		b, ok := s.plainString()
		e.EventType = EventType(b)
		return 1 << 8, ok
	case "biz_type":
		return str(1<<9, &e.BizType)
	case "biz_id":
		return str(1<<10, &e.BizID)
	case "idempotency_key":
		return str(1<<11, &e.IdempotencyKey)
	case "version":
		s.skipSpace()
		start := s.off
		if s.off >= len(s.data) || !s.skipNumber() {
			return 0, false
		}
		n, ok := parseJSONInt(s.data[start:s.off])
		e.Version = int(n)
		return 1 << 12, ok
	case "occurred_at": // read by time.Time's own UnmarshalJSON, as encoding/json does
		s.skipSpace()
		start := s.off
		if _, ok := s.plainString(); !ok {
			return 0, false
		}
		return 1 << 13, e.OccurredAt.UnmarshalJSON(s.data[start:s.off]) == nil
	case "actor":
		return 1 << 14, s.actor(&e.Actor)
	case "stream_id":
		return str(1<<15, &e.StreamID)
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

// uuid reads a UUID as its UnmarshalText does from a JSON string.
func (s *scanner) uuid() (uuid.UUID, bool) {
	b, ok := s.plainString()
	if !ok {
		return uuid.UUID{}, false
	}
	id, err := uuid.ParseBytes(b)
	return id, err == nil
}

// actor reads {"type": …, "id": …}, each key at most once, nothing else.
func (s *scanner) actor(a *Actor) bool {
	if !s.consume('{') {
		return false
	}
	if s.consume('}') {
		return true
	}
	var seen uint8
	for {
		key, ok := s.plainString()
		if !ok || !s.consume(':') {
			return false
		}
		b, ok := s.plainString()
		if !ok {
			return false
		}
		switch string(key) {
		case "type":
			if seen&1 != 0 {
				return false
			}
			seen |= 1
			a.Type = string(b)
		case "id":
			if seen&2 != 0 {
				return false
			}
			seen |= 2
			a.ID = string(b)
		default:
			return false
		}
		if s.consume('}') {
			return true
		}
		if !s.consume(',') {
			return false
		}
	}
}
