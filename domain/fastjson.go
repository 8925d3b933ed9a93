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

// scanner reads JSON from data at off.
type scanner struct {
	data []byte
	off  int
}

func (s *scanner) skipSpace() {
	for s.off < len(s.data) {
		switch s.data[s.off] {
		case ' ', '\t', '\n', '\r':
			s.off++
		default:
			return
		}
	}
}

// consume skips whitespace and then c; false when the next byte is not c.
func (s *scanner) consume(c byte) bool {
	s.skipSpace()
	if s.off < len(s.data) && s.data[s.off] == c {
		s.off++
		return true
	}
	return false
}

// peek skips whitespace and returns the next byte, 0 at the end.
func (s *scanner) peek() byte {
	s.skipSpace()
	if s.off < len(s.data) {
		return s.data[s.off]
	}
	return 0
}

// plainString reads a string without escapes and returns its contents (a slice of data); ok is
// false for any other value, or a string with an escape, a control character or invalid UTF-8
// (encoding/json replaces invalid UTF-8, which the caller leaves to it).
func (s *scanner) plainString() (b []byte, ok bool) {
	s.skipSpace()
	if s.off >= len(s.data) || s.data[s.off] != '"' {
		return nil, false
	}
	start, ascii := s.off+1, true
	for i := start; i < len(s.data); i++ {
		switch c := s.data[i]; {
		case c == '"':
			b = s.data[start:i]
			if !ascii && !utf8.Valid(b) {
				return nil, false
			}
			s.off = i + 1
			return b, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, false
}

// value skips one JSON value of any kind, validating it as encoding/json's scanner does, and
// returns its bytes (without the whitespace around it).
func (s *scanner) value() (b []byte, ok bool) {
	s.skipSpace()
	start := s.off
	if !s.skipValue(0) {
		return nil, false
	}
	return s.data[start:s.off], true
}

// maxDepth bounds the containers nested in a value the scanner follows; a value nested deeper
// is left to encoding/json, which refuses what nests past 10,000 levels in the whole document
// (far above this bound, so the levels around the value never matter).
const maxDepth = 1000

func (s *scanner) skipValue(depth int) bool {
	if depth >= maxDepth || s.off >= len(s.data) {
		return false
	}
	switch c := s.data[s.off]; {
	case c == '{':
		s.off++
		if s.consume('}') {
			return true
		}
		for {
			s.skipSpace()
			if !s.skipString() || !s.consume(':') {
				return false
			}
			s.skipSpace()
			if !s.skipValue(depth + 1) {
				return false
			}
			if s.consume('}') {
				return true
			}
			if !s.consume(',') {
				return false
			}
		}
	case c == '[':
		s.off++
		if s.consume(']') {
			return true
		}
		for {
			s.skipSpace()
			if !s.skipValue(depth + 1) {
				return false
			}
			if s.consume(']') {
				return true
			}
			if !s.consume(',') {
				return false
			}
		}
	case c == '"':
		return s.skipString()
	case c == '-' || (c >= '0' && c <= '9'):
		return s.skipNumber()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

func (s *scanner) literal(lit string) bool {
	if len(s.data)-s.off < len(lit) || string(s.data[s.off:s.off+len(lit)]) != lit {
		return false
	}
	s.off += len(lit)
	return true
}

// skipString skips a string with any escapes JSON allows; bytes from 0x80 up pass as
// encoding/json's scanner lets them.
func (s *scanner) skipString() bool {
	if s.off >= len(s.data) || s.data[s.off] != '"' {
		return false
	}
	for i := s.off + 1; i < len(s.data); i++ {
		switch c := s.data[i]; {
		case c == '"':
			s.off = i + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			i++
			if i >= len(s.data) {
				return false
			}
			switch s.data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(s.data) {
					return false
				}
				for _, h := range s.data[i+1 : i+5] {
					if !isHex(h) {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// skipNumber skips a number of RFC 8259's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) skipNumber() bool {
	d, i := s.data, s.off
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return false
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return false
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	s.off = i
	return true
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
	s.skipSpace()
	return s.off == len(s.data)
}
