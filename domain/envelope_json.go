package domain

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// AppendJSON appends the wire JSON of e to b and returns the extended slice: exactly what
// json.Marshal(e) writes (the fields in order, empty optional ones left out, strings escaped as
// encoding/json escapes them) for a payload that is compact JSON, and otherwise the payload as it
// is, spacing included. It needs no reflection and does not validate the payload again, which is
// most of the cost of json.Marshal: the relay and the export write every event through it, and
// the event store only holds valid JSON. An empty payload is written as null.
func (e *Envelope) AppendJSON(b []byte) []byte {
	b = append(b, `{"event_id":"`...)
	b = appendUUID(b, e.EventID)
	b = append(b, '"')
	b = appendOptional(b, `,"trace_id":`, e.TraceID)
	b = appendOptional(b, `,"correlation_id":`, e.CorrelationID)
	b = appendOptional(b, `,"causation_id":`, e.CausationID)
	if e.ParentEventID != nil {
		b = append(b, `,"parent_event_id":"`...)
		b = appendUUID(b, *e.ParentEventID)
		b = append(b, '"')
	}
	b = append(b, `,"tenant_id":`...)
	b = appendString(b, e.TenantID.String())
	b = appendOptional(b, `,"source_service":`, e.SourceService)
	b = appendOptional(b, `,"target_service":`, e.TargetService)
	b = append(b, `,"event_type":`...)
	b = appendString(b, string(e.EventType))
	b = appendOptional(b, `,"biz_type":`, e.BizType)
	b = appendOptional(b, `,"biz_id":`, e.BizID)
	b = appendOptional(b, `,"idempotency_key":`, e.IdempotencyKey)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, int64(e.Version), 10)
	b = append(b, `,"occurred_at":"`...)
	b = e.OccurredAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","actor":{"type":`...)
	b = appendString(b, e.Actor.Type)
	b = append(b, `,"id":`...)
	b = appendString(b, e.Actor.ID)
	b = appendOptional(b, `,"key_id":`, e.Actor.KeyID)
	b = append(b, `},"stream_id":`...)
	b = appendString(b, e.StreamID)
	b = append(b, `,"stream_version":"`...)
	b = strconv.AppendInt(b, e.StreamVersion, 10)
	b = append(b, `","position":"`...)
	b = strconv.AppendInt(b, e.Position, 10)
	b = append(b, `","payload":`...)
	if len(e.Payload) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, e.Payload...)
	}
	return append(b, '}')
}

func appendOptional(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return appendString(append(b, key...), v)
}

func appendUUID(b []byte, id uuid.UUID) []byte {
	var s [36]byte
	const hex = "0123456789abcdef"
	j := 0
	for i, c := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			s[j] = '-'
			j++
		}
		s[j], s[j+1] = hex[c>>4], hex[c&0xf]
		j += 2
	}
	return append(b, s[:]...)
}

// appendString appends s as a JSON string the way encoding/json does: HTML-sensitive characters
// and U+2028/U+2029 escaped, invalid UTF-8 replaced with U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
