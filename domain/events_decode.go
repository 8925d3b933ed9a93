package domain

import (
	"encoding/json"
	"slices"
	"time"
)

// decodeMessageSent decodes the canonical form of a MessageSent payload into m, as
// json.Unmarshal would, and reports true; it reports false, with m unchanged, for any payload
// outside that form (see the scanner), which the caller then gives to json.Unmarshal.
func decodeMessageSent(data []byte, m *MessageSent) bool {
	s := scanner{data: data}
	if !s.consume('{') {
		return false
	}
	v := *m // json.Unmarshal keeps the fields the payload does not name
	var seen uint16
	if !s.consume('}') {
		for {
			key, ok := s.plainString()
			if !ok || !s.consume(':') {
				return false
			}
			bit, ok := decodeSentField(&s, string(key), &v)
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
	if !s.end() {
		return false
	}
	*m = v
	return true
}

// decodeSentField decodes the value of key into v and returns the key's bit.
func decodeSentField(s *scanner, key string, v *MessageSent) (uint16, bool) {
	ok := false
	switch key {
	case "message_id":
		var b []byte
		b, ok = s.plainString()
		v.MessageID = string(b)
		return 1 << 0, ok
	case "topic":
		var b []byte
		b, ok = s.plainString()
		v.Topic = string(b)
		return 1 << 1, ok
	case "group_id":
		v.GroupID, ok = s.quotedInt()
		return 1 << 2, ok
	case "to":
		v.To, ok = s.userID()
		return 1 << 3, ok
	case "seq":
		v.Seq, ok = s.quotedInt()
		return 1 << 4, ok
	case "from":
		v.From, ok = s.userID()
		return 1 << 5, ok
	case "client_msg_id":
		var b []byte
		b, ok = s.plainString()
		v.ClientMsgID = string(b)
		return 1 << 6, ok
	case "msg_type":
		var b []byte
		b, ok = s.plainString()
		v.MsgType = MsgType(b)
		return 1 << 7, ok
	case "content":
		var b []byte
		if b, ok = s.value(); ok && string(b) != "null" {
			v.Content = append(json.RawMessage(nil), b...)
			return 1 << 8, true
		}
	case "head":
		var b []byte
		if b, ok = s.value(); ok && len(b) > 0 && b[0] == '{' {
			if isEmptyObject(b) {
				return 1 << 9, true
			}
			// Into copies of the slices: json.Unmarshal fills a slice in place, and m must stay
			// as it was if the scanner gives up after this field.
			h := v.Head
			h.Mentions, h.Files = slices.Clone(h.Mentions), slices.Clone(h.Files)
			if json.Unmarshal(b, &h) != nil {
				return 0, false
			}
			v.Head = h
			return 1 << 9, true
		}
	case "sent_at":
		start := s.off
		if _, ok = s.plainString(); ok {
			var t time.Time
			if t.UnmarshalJSON(trimSpaceLeft(s.data[start:s.off])) == nil {
				v.SentAt = t
				return 1 << 10, true
			}
		}
	}
	return 0, false
}

// userID reads a UserID as its UnmarshalText does from a JSON string.
func (s *scanner) userID() (UserID, bool) {
	b, ok := s.plainString()
	if !ok {
		return 0, false
	}
	u, err := ParseUserID(string(b))
	return u, err == nil
}

// isEmptyObject reports whether b is {} with only whitespace inside.
func isEmptyObject(b []byte) bool {
	s := scanner{data: b}
	return s.consume('{') && s.consume('}') && s.end()
}

func trimSpaceLeft(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}
