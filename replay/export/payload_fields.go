package export

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/imledger/imledger/domain"
)

// errNotObject is the error of a payload that is not a JSON object.
var errNotObject = errors.New("payload is not a JSON object")

// readMessageFields fills m from the top-level fields topic, seq, from, msg_type and sent_at of a
// payload, skipping every other member (message content may be large and may itself hold those
// names) without decoding it. It is what json.Unmarshal into messageFields does, several times
// faster, for payloads the event store holds, which are valid JSON; on anything it does not
// expect it falls back to json.Unmarshal.
func readMessageFields(payload []byte, m *messageFields) error {
	if err := scanTopLevel(payload, m); err != nil {
		*m = messageFields{}
		return json.Unmarshal(payload, m)
	}
	return nil
}

func scanTopLevel(b []byte, m *messageFields) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errNotObject
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for i < len(b) {
		if b[i] != '"' {
			return errNotObject
		}
		kEnd, esc := stringEnd(b, i)
		if kEnd < 0 || esc {
			return errNotObject
		}
		key := b[i+1 : kEnd]
		i = skipSpace(b, kEnd+1)
		if i >= len(b) || b[i] != ':' {
			return errNotObject
		}
		i = skipSpace(b, i+1)
		vEnd := valueEnd(b, i)
		if vEnd < 0 {
			return errNotObject
		}
		if err := m.set(string(key), b[i:vEnd]); err != nil {
			return err
		}
		i = skipSpace(b, vEnd)
		if i >= len(b) {
			return errNotObject
		}
		if b[i] == '}' {
			return nil
		}
		if b[i] != ',' {
			return errNotObject
		}
		i = skipSpace(b, i+1)
	}
	return errNotObject
}

// set stores the member key with the raw JSON value v if m wants it.
func (m *messageFields) set(key string, v []byte) error {
	switch key {
	case "topic", "msg_type", "seq", "from", "sent_at":
	default:
		return nil
	}
	if len(v) < 2 || v[0] != '"' {
		return errNotObject
	}
	s, esc := v[1:len(v)-1], false
	for _, c := range s {
		esc = esc || c == '\\'
	}
	if esc {
		return errNotObject
	}
	var err error
	switch key {
	case "topic":
		m.Topic = string(s)
	case "msg_type":
		m.MsgType = string(s)
	case "seq":
		m.Seq, err = strconv.ParseInt(string(s), 10, 64)
	case "from":
		var n int64
		n, err = strconv.ParseInt(string(s), 10, 64)
		m.From = domain.UserID(n)
	case "sent_at":
		m.SentAt, err = time.Parse(time.RFC3339Nano, string(s))
	}
	return err
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index of the quote that closes the string starting at b[i] and whether
// the string holds an escape; -1 when it does not close.
func stringEnd(b []byte, i int) (int, bool) {
	esc := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			esc = true
			j++
		case '"':
			return j, esc
		}
	}
	return -1, esc
}

// valueEnd returns the index just past the JSON value starting at b[i], -1 when it is cut short.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		j, _ := stringEnd(b, i)
		if j < 0 {
			return -1
		}
		return j + 1
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				k, _ := stringEnd(b, j)
				if k < 0 {
					return -1
				}
				j = k
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}
