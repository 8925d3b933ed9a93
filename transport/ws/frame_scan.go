package ws

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
)

// Errors of splitFrame and checkKeys; their text goes to the client in a 400 bad_frame.
var (
	errNotOneKey     = errors.New("a frame is a JSON object with exactly one key")
	errDuplicateKey  = errors.New("duplicate key")
	errMalformedJSON = errors.New("invalid JSON")
	errKeyCase       = errors.New("field names are case-sensitive")
)

// splitFrame returns the type and body of a client message: a JSON object with exactly one key.
// It reads the object's structure only; the body is checked when it is decoded. A message with
// the same key twice fails with errDuplicateKey and the first body, so the answer can echo its
// id (encoding/json would keep the last and drop the first unanswered).
func splitFrame(payload []byte) (typ string, body []byte, err error) {
	sc := objectScanner{b: payload}
	if !sc.open() {
		return "", nil, errNotOneKey
	}
	key, body, more, err := sc.next()
	if err != nil || !more {
		return "", nil, errNotOneKey
	}
	key2, _, more, err := sc.next()
	switch {
	case err != nil:
		return "", nil, errNotOneKey
	case more && bytes.Equal(key, key2):
		return "", body, errDuplicateKey
	case more:
		return "", nil, errNotOneKey
	}
	if !sc.end() {
		return "", nil, errNotOneKey
	}
	return string(key), body, nil
}

// checkKeys checks the top-level keys of a frame body for what encoding/json lets through: a key
// given twice (it would keep the last) and a key that matches a field of the frame only when case
// is ignored ("TOPIC"; it would fill topic). fields are the frame's field names; keys that are
// none of them are ignored, as encoding/json ignores them. A body that is not an object is left
// to the decoder.
func checkKeys(body []byte, fields []string) error {
	sc := objectScanner{b: body}
	if !sc.open() {
		return nil
	}
	var buf [8][]byte
	seen := buf[:0]
	for {
		key, _, more, err := sc.next()
		if err != nil || !more {
			return nil // the decoder reports malformed JSON
		}
		for _, k := range seen {
			if bytes.Equal(k, key) {
				return errDuplicateKey
			}
		}
		seen = append(seen, key)
		for _, f := range fields {
			// Not only ASCII case: encoding/json also folds "ſ" to "s" and "K" (Kelvin) to "k".
			if string(key) != f && strings.EqualFold(string(key), f) {
				return errKeyCase
			}
		}
	}
}

// frameFields are the JSON field names of each client frame's body.
var frameFields = map[string][]string{
	"hi": jsonFields(hiFrame{}), "login": jsonFields(loginFrame{}), "sub": jsonFields(topicFrame{}),
	"leave": jsonFields(topicFrame{}), "pub": jsonFields(pubFrame{}), "get": jsonFields(getFrame{}),
	"note": jsonFields(noteFrame{}), "ping": jsonFields(pingFrame{}),
}

func jsonFields(v any) []string {
	t := reflect.TypeOf(v)
	out := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}

// objectScanner walks the members of one JSON object without decoding their values.
type objectScanner struct {
	b     []byte
	i     int
	count int
}

// open consumes the opening brace.
func (s *objectScanner) open() bool {
	s.skipSpace()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	return true
}

// next returns the next member's key (decoded) and raw value; more is false at the closing brace.
func (s *objectScanner) next() (key, value []byte, more bool, err error) {
	s.skipSpace()
	if s.i >= len(s.b) {
		return nil, nil, false, errMalformedJSON
	}
	if s.count > 0 {
		switch s.b[s.i] {
		case '}':
			s.i++
			return nil, nil, false, nil
		case ',':
			s.i++
			s.skipSpace()
		default:
			return nil, nil, false, errMalformedJSON
		}
	} else if s.b[s.i] == '}' {
		s.i++
		return nil, nil, false, nil
	}
	start := s.i
	if !s.skipString() {
		return nil, nil, false, errMalformedJSON
	}
	key = s.b[start+1 : s.i-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		var k string
		if json.Unmarshal(s.b[start:s.i], &k) != nil {
			return nil, nil, false, errMalformedJSON
		}
		key = []byte(k)
	}
	s.skipSpace()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return nil, nil, false, errMalformedJSON
	}
	s.i++
	s.skipSpace()
	start = s.i
	if !s.skipValue() {
		return nil, nil, false, errMalformedJSON
	}
	s.count++
	return key, s.b[start:s.i], true, nil
}

// end reports whether only white space follows.
func (s *objectScanner) end() bool {
	s.skipSpace()
	return s.i == len(s.b)
}

func (s *objectScanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// skipString skips a string at s.i, quotes included; false if it is not one. Control characters
// are refused, so a key taken as it is (without escapes) is a valid JSON string.
func (s *objectScanner) skipString() bool {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return false
	}
	for i := s.i + 1; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '"':
			s.i = i + 1
			return true
		case c == '\\':
			i++
		case c < 0x20:
			return false
		}
	}
	return false
}

// skipValue skips one value at s.i. It checks nesting and strings only: the decoder checks the
// rest of a body.
func (s *objectScanner) skipValue() bool {
	depth := 0
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			if !s.skipString() {
				return false
			}
			if depth == 0 {
				return true
			}
		case '{', '[':
			depth++
			s.i++
		case '}', ']':
			if depth == 0 {
				return true // the end of the enclosing object: a scalar ended here
			}
			depth--
			s.i++
			if depth == 0 {
				return true
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return true
			}
			s.i++
		default:
			s.i++
		}
	}
	return depth == 0
}
