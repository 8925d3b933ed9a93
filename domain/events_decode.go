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
	s := scanner{contentScan{b: data}}
	v := *m // json.Unmarshal keeps the fields the payload does not name
	if !s.object(func(key []byte) (uint32, bool) { return decodeSentField(&s, key, &v) }) || !s.end() {
		return false
	}
	*m = v
	return true
}

// decodeSentField decodes the value of key into v and returns the key's bit.
func decodeSentField(s *scanner, key []byte, v *MessageSent) (uint32, bool) {
	switch string(key) {
	case "message_id":
		return 1 << 0, s.str(&v.MessageID)
	case "topic":
		return 1 << 1, s.str(&v.Topic)
	case "group_id":
		n, ok := s.quotedInt()
		v.GroupID = n
		return 1 << 2, ok
	case "to":
		u, ok := s.userID()
		v.To = u
		return 1 << 3, ok
	case "seq":
		n, ok := s.quotedInt()
		v.Seq = n
		return 1 << 4, ok
	case "from":
		u, ok := s.userID()
		v.From = u
		return 1 << 5, ok
	case "client_msg_id":
		return 1 << 6, s.str(&v.ClientMsgID)
	case "msg_type":
		b, ok := s.plainString()
		v.MsgType = MsgType(b)
		return 1 << 7, ok
	case "content":
		b, ok := s.value()
		if !ok || string(b) == "null" {
			return 0, false
		}
		v.Content = append(json.RawMessage(nil), b...)
		return 1 << 8, true
	case "head":
		b, ok := s.value()
		if !ok || b[0] != '{' {
			return 0, false
		}
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
	case "sent_at":
		return 1 << 10, s.time(&v.SentAt)
	}
	return 0, false
}

// time reads a JSON string as time.Time's own UnmarshalJSON does (which encoding/json calls).
func (s *scanner) time(into *time.Time) bool {
	s.space()
	start := s.i
	if _, ok := s.plainString(); !ok {
		return false
	}
	var t time.Time
	if t.UnmarshalJSON(s.b[start:s.i]) != nil {
		return false
	}
	*into = t
	return true
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
	s := scanner{contentScan{b: b}}
	return s.consume('{') && s.consume('}') && s.end()
}
