package domain

// A small JSON scanner for the payloads decoded most often (message.*.sent.v1: every message
// projector and every rebuild decodes every one). encoding/json validates the whole payload
// before it decodes, then finds each field by name through reflection: two thirds of a rebuild's
// decoding time. The scanner reads the canonical shape of a payload in one pass and reports
// false for anything else (an escape in a string, a key it does not know, a repeated key, null
// where a value is expected), and the caller then decodes with encoding/json, which stays the
// judge of every payload the scanner leaves alone: whatever the scanner accepts, encoding/json
// accepts and decodes to the same value (the tests hold it to that).

import "unicode/utf8"

// scanner reads JSON from b at i, with contentScan's whitespace and value rules.
type scanner struct{ contentScan }

// consume skips whitespace and then c; false when the next byte is not c.
func (s *scanner) consume(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// plainString reads a string without escapes and returns its contents (a slice of b); ok is
// false for any other value, or a string with an escape, a control character or invalid UTF-8
// (encoding/json replaces invalid UTF-8, which the caller leaves to it).
func (s *scanner) plainString() (b []byte, ok bool) {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start, ascii := s.i+1, true
	for i := start; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '"':
			b = s.b[start:i]
			if !ascii && !utf8.Valid(b) {
				return nil, false
			}
			s.i = i + 1
			return b, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, false
}

// value skips one JSON value of any kind and returns its bytes (without the whitespace around
// it). The value is checked by contentScan, the check of message content: valid JSON (RFC 8259)
// that every store keeps as it is. What it refuses beyond the grammar (invalid UTF-8, lone
// surrogates, \u0000, numbers past a double, nesting past MaxContentDepth) encoding/json may
// take; the caller then leaves the payload to encoding/json.
func (s *scanner) value() (b []byte, ok bool) {
	s.space()
	start := s.i
	if s.contentScan.value(0) != nil {
		return nil, false
	}
	return s.b[start:s.i], true
}

// object reads an object whose keys are each given to field once, in order, and reports false
// when field does or when a key comes twice (encoding/json would keep the last; the caller
// leaves that to it). field reads the key's value and returns the key's bit.
func (s *scanner) object(field func(key []byte) (bit uint32, ok bool)) bool {
	if !s.consume('{') {
		return false
	}
	if s.consume('}') {
		return true
	}
	var seen uint32
	for {
		key, ok := s.plainString()
		if !ok || !s.consume(':') {
			return false
		}
		bit, ok := field(key)
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		if s.consume('}') {
			return true
		}
		if !s.consume(',') {
			return false
		}
	}
}

// str reads a plain string (see plainString) into into.
func (s *scanner) str(into *string) bool {
	b, ok := s.plainString()
	*into = string(b)
	return ok
}

// jsonInt reads a JSON number that is an integer fitting int64 (a fraction or an exponent
// leaves the next byte unread, which the object around it then refuses).
func (s *scanner) jsonInt() (int64, bool) {
	s.space()
	start := s.i
	for s.i < len(s.b) && (s.b[s.i] == '-' || s.b[s.i] >= '0' && s.b[s.i] <= '9') {
		s.i++
	}
	return parseJSONInt(s.b[start:s.i])
}

// quotedInt reads a ",string" integer: a string holding a JSON integer that fits int64.
func (s *scanner) quotedInt() (int64, bool) {
	b, ok := s.plainString()
	if !ok {
		return 0, false
	}
	return parseJSONInt(b)
}

// parseJSONInt parses a JSON integer (no leading zeros, no '+', no fraction or exponent) that
// fits int64.
func parseJSONInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// end reports whether only whitespace is left.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.b)
}
