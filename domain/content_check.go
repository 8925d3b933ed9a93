package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// MaxContentDepth is the deepest nesting of arrays and objects a message's content may have:
// `[[1]]` is 2 deep, a string or number 0. MariaDB's JSON columns refuse 32 levels and more;
// the limit stays well below, so the read models never refuse what the event store took.
const MaxContentDepth = 20

// Stable reasons of refused content (field "content"), besides required, too_large and bad_json.
const (
	// ReasonTooDeep: arrays and objects nested deeper than MaxContentDepth.
	ReasonTooDeep = "too_deep"
	// ReasonBadText: a string or key holds text that not every store keeps: invalid UTF-8, a
	// surrogate code point (an unpaired `\ud800` escape, or one encoded raw), or U+0000
	// (`\u0000`, which PostgreSQL's jsonb refuses).
	ReasonBadText = "bad_text"
	// ReasonBadNumber: a number that is not a finite double: beyond ±1.7976931348623157e308
	// (such as 1e400), or not zero yet too small to be told from zero (such as 1e-400).
	ReasonBadNumber = "bad_number"
	// ReasonDuplicateKey: an object that names one key twice (`{"a":1,"a":2}`, also when one
	// of them is written with escapes). The live frame would carry both while jsonb and
	// MariaDB keep only one, so history would differ from what was delivered.
	ReasonDuplicateKey = "duplicate_key"
)

// contentScan checks message content in one pass over its bytes: that it is one JSON value
// (RFC 8259) and that every store accepts it as it is (see NewContent). grow counts the bytes its
// numbers gain when PostgreSQL writes them out in full (jsonb keeps numbers as numeric: 1e300
// comes back as a 1 and 300 zeros).
type contentScan struct {
	b    []byte
	i    int
	grow int
	// body is set while CheckBodyText scans a whole request body: refusals name the top-level
	// member being scanned (member), and nesting is left to the decoder's own limit.
	body   bool
	member string
	// uniqueKeys refuses an object that names a key twice (checkContent sets it; decoding what
	// the log already holds does not).
	uniqueKeys bool
	// The keys of the objects being scanned, innermost object last: the first len(fixed) in
	// fixed, the rest in more. Kept as offsets, not slices, so a scan allocates nothing for the
	// keys of ordinary content.
	nkeys int
	fixed [24]keyRange
	more  []keyRange
}

// keyRange is an object key's string literal, quotes included, at s.b[start:end].
type keyRange struct {
	start, end int
	escaped    bool // the literal holds an escape: compare it decoded
}

// maxBodyDepth is the deepest nesting CheckBodyText follows; encoding/json refuses deeper
// bodies itself, and the bound keeps the scan's recursion small.
const maxBodyDepth = 10000

// CheckBodyText scans a JSON request body, before anything decodes it, for the text and numbers
// that a decoder would silently change or that no store keeps, and which NewContent refuses in
// content: a string or key with invalid UTF-8, a surrogate code point (an unpaired `\ud800`
// escape, or one encoded raw) or `\u0000`, and a number that is not a finite double or that
// underflows to zero. encoding/json would turn each invalid byte and lone surrogate into U+FFFD,
// so that different inputs (two passwords) became the same text.
//
// A refusal is a *ValidationError with reason bad_text or bad_number whose field is the
// top-level member of the body that holds the offence (the key as sent, such as "password" or
// "content"), or "body" for an offence outside every member (in a top-level key, in a body that
// is not an object, or bytes that are not UTF-8 at all). A body that is not JSON but is valid
// UTF-8 passes: the decoder answers it as malformed. Message content's own limits (size,
// depth) are NewContent's, not this check's.
func CheckBodyText(body []byte) error {
	s := contentScan{b: body, body: true}
	s.space()
	err := s.value(0)
	if err == nil {
		s.space()
		if s.i != len(s.b) {
			err = s.syntax()
		}
	}
	var ve *ValidationError
	if err == nil || !errors.As(err, &ve) || ve.Reason != "bad_json" {
		return err
	}
	// Malformed JSON is the decoder's to answer, unless the bytes are not even UTF-8.
	if !utf8.Valid(body) {
		return invalid("body", ReasonBadText, "the body is not valid UTF-8")
	}
	return nil
}

// field is the field a refusal names: content, or in a body the top-level member.
func (s *contentScan) field() string {
	switch {
	case !s.body:
		return "content"
	case s.member == "":
		return "body"
	}
	return s.member
}

// checkContent scans raw and returns the bytes its numbers gain in the event store, or a
// *ValidationError for field "content".
func checkContent(raw []byte) (grow int, err error) {
	s := contentScan{b: raw, uniqueKeys: true}
	s.space()
	if err := s.value(0); err != nil {
		return 0, err
	}
	s.space()
	if s.i != len(s.b) {
		return 0, s.syntax()
	}
	return s.grow, nil
}

func (s *contentScan) syntax() error {
	return invalid("content", "bad_json", "content must be one JSON value (error at byte "+strconv.Itoa(s.i)+")")
}

func (s *contentScan) badText(what string) error {
	return invalid(s.field(), ReasonBadText, what+" at byte "+strconv.Itoa(s.i))
}

func (s *contentScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans one value at nesting depth (the number of arrays and objects around it).
func (s *contentScan) value(depth int) error {
	if s.i >= len(s.b) {
		return s.syntax()
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		return s.str()
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.syntax()
}

func (s *contentScan) literal(lit string) error {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return s.syntax()
	}
	s.i += len(lit)
	return nil
}

func tooDeep() error {
	return invalid("content", ReasonTooDeep, "arrays and objects nested at most "+strconv.Itoa(MaxContentDepth)+" deep")
}

// tooDeep refuses nesting beyond MaxContentDepth; in a body, beyond maxBodyDepth, as
// malformed, which the decoder answers.
func (s *contentScan) tooDeep(depth int) error {
	switch {
	case !s.body && depth > MaxContentDepth:
		return tooDeep()
	case s.body && depth > maxBodyDepth:
		return s.syntax()
	}
	return nil
}

// object scans an object whose '{' is at s.i and which is depth deep.
func (s *contentScan) object(depth int) error {
	if err := s.tooDeep(depth); err != nil {
		return err
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	first := s.nkeys // this object's keys are the key ranges from first on, or many once it has many
	err := s.members(depth, first)
	s.nkeys = first
	return err
}

// members scans an object's members from its first key on, recording its keys from key range
// first on.
func (s *contentScan) members(depth, first int) error {
	var many map[string]struct{}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.syntax()
		}
		key := s.i
		if err := s.str(); err != nil {
			return err
		}
		keyEnd := s.i
		if s.uniqueKeys {
			if err := s.key(key, first, &many); err != nil {
				return err
			}
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.syntax()
		}
		s.i++
		s.space()
		if s.body && depth == 1 {
			s.member = memberName(s.b[key:keyEnd])
		}
		if err := s.value(depth); err != nil {
			return err
		}
		if s.body && depth == 1 {
			s.member = ""
		}
		s.space()
		if s.i >= len(s.b) {
			return s.syntax()
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.space()
		case '}':
			s.i++
			return nil
		default:
			return s.syntax()
		}
	}
}

// manyKeys is the number of keys from which an object's keys are looked up in a map rather
// than by a linear search, so a large object costs linear time, not quadratic.
const manyKeys = 32

// key records the object key whose literal spans s.b[start:s.i] and refuses it when the object,
// whose keys are the key ranges from first on (or *many, once it has manyKeys), already has it.
// Keys are compared decoded, so "a" and "\u0061" are the same key.
func (s *contentScan) key(start, first int, many *map[string]struct{}) error {
	k := keyRange{start: start, end: s.i, escaped: bytes.IndexByte(s.b[start:s.i], '\\') >= 0}
	if *many != nil {
		d := s.decodeKey(k)
		if _, ok := (*many)[d]; ok {
			return s.duplicateKey(d)
		}
		(*many)[d] = struct{}{}
		return nil
	}
	for i := first; i < s.nkeys; i++ {
		if s.sameKey(s.keyAt(i), k) {
			return s.duplicateKey(s.decodeKey(k))
		}
	}
	if s.nkeys < len(s.fixed) {
		s.fixed[s.nkeys] = k
	} else {
		s.more = append(s.more[:s.nkeys-len(s.fixed)], k)
	}
	s.nkeys++
	if s.nkeys-first >= manyKeys {
		*many = make(map[string]struct{}, 2*manyKeys)
		for i := first; i < s.nkeys; i++ {
			(*many)[s.decodeKey(s.keyAt(i))] = struct{}{}
		}
	}
	return nil
}

func (s *contentScan) keyAt(i int) keyRange {
	if i < len(s.fixed) {
		return s.fixed[i]
	}
	return s.more[i-len(s.fixed)]
}

func (s *contentScan) sameKey(a, b keyRange) bool {
	if !a.escaped && !b.escaped {
		return bytes.Equal(s.b[a.start:a.end], s.b[b.start:b.end])
	}
	return s.decodeKey(a) == s.decodeKey(b)
}

// decodeKey returns the key k names, its escapes decoded.
func (s *contentScan) decodeKey(k keyRange) string {
	lit := s.b[k.start:k.end]
	if !k.escaped {
		return string(lit[1 : len(lit)-1])
	}
	var d string
	_ = json.Unmarshal(lit, &d) // the scan has checked the literal
	return d
}

func (s *contentScan) duplicateKey(k string) error {
	return invalid("content", ReasonDuplicateKey, "an object names the key "+strconv.Quote(k)+" twice (before byte "+strconv.Itoa(s.i)+")")
}

// array scans an array whose '[' is at s.i and which is depth deep.
func (s *contentScan) array(depth int) error {
	if err := s.tooDeep(depth); err != nil {
		return err
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		if err := s.value(depth); err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.b) {
			return s.syntax()
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.space()
		case ']':
			s.i++
			return nil
		default:
			return s.syntax()
		}
	}
}

// str scans a string (a value or a key) whose opening quote is at s.i.
func (s *contentScan) str() error {
	s.i++
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return nil
		case c == '\\':
			if err := s.escape(); err != nil {
				return err
			}
		case c < 0x20:
			return s.syntax() // control characters must be escaped
		case c < utf8.RuneSelf:
			s.i++
		default:
			// DecodeRune refuses invalid UTF-8, overlong forms and encoded surrogates alike.
			r, n := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && n == 1 {
				return s.badText("invalid UTF-8")
			}
			s.i += n
		}
	}
	return s.syntax()
}

// escape scans the escape sequence at s.i.
func (s *contentScan) escape() error {
	if s.i+1 >= len(s.b) {
		return s.syntax()
	}
	switch s.b[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return nil
	case 'u':
	default:
		return s.syntax()
	}
	r, ok := s.hex4(s.i + 2)
	if !ok {
		return s.syntax()
	}
	switch {
	case r == 0:
		return s.badText(`\u0000`)
	case r >= 0xdc00 && r <= 0xdfff:
		return s.badText("a low surrogate without a high one")
	case r >= 0xd800 && r <= 0xdbff:
		// A high surrogate must be followed at once by an escaped low one.
		j := s.i + 6
		if j+1 < len(s.b) && s.b[j] == '\\' && s.b[j+1] == 'u' {
			if lo, ok := s.hex4(j + 2); ok && lo >= 0xdc00 && lo <= 0xdfff {
				s.i = j + 6
				return nil
			}
		}
		return s.badText("a high surrogate without a low one")
	}
	s.i += 6
	return nil
}

// hex4 decodes the four hex digits at j.
func (s *contentScan) hex4(j int) (rune, bool) {
	if j+4 > len(s.b) {
		return 0, false
	}
	var r rune
	for _, c := range s.b[j : j+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// maxPlainNumber is the longest number without an exponent that needs no range check: a double
// overflows only beyond 309 integer digits and underflows only below 323 leading zeros.
const maxPlainNumber = 300

// number scans a number at s.i, checks that it is a finite double that does not underflow to
// zero, and adds to s.grow what PostgreSQL's plain notation adds to an exponent form.
func (s *contentScan) number() error {
	start := s.i
	neg := s.b[s.i] == '-'
	if neg {
		s.i++
	}
	intDigits := s.digits()
	switch {
	case intDigits == 0:
		return s.syntax()
	case intDigits > 1 && s.b[start+b2i(neg)] == '0':
		s.i = start + b2i(neg) + 1 // a leading zero ends the number; what follows is an error
		return s.syntax()
	}
	fracDigits := 0
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if fracDigits = s.digits(); fracDigits == 0 {
			return s.syntax()
		}
	}
	hasExp, exp := false, 0
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		hasExp = true
		s.i++
		expNeg := false
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			expNeg = s.b[s.i] == '-'
			s.i++
		}
		expStart := s.i
		if s.digits() == 0 {
			return s.syntax()
		}
		for _, c := range s.b[expStart:s.i] {
			if exp < 1_000_000 { // far beyond any double; only a bound against overflow
				exp = exp*10 + int(c-'0')
			}
		}
		if expNeg {
			exp = -exp
		}
	}
	lit := s.b[start:s.i]
	if !hasExp && len(lit) <= maxPlainNumber {
		return nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return invalid(s.field(), ReasonBadNumber, "a number beyond the range of a double at byte "+strconv.Itoa(start))
	}
	if f == 0 && !allZeroDigits(lit) {
		return invalid(s.field(), ReasonBadNumber, "a number too small for a double at byte "+strconv.Itoa(start))
	}
	if hasExp {
		// Plain notation: the integer part has intDigits+exp digits (at least one), the fraction
		// fracDigits-exp digits; an upper bound of what PostgreSQL writes.
		plain := b2i(neg) + max(1, intDigits+exp)
		if frac := fracDigits - exp; frac > 0 {
			plain += 1 + frac
		}
		s.grow += max(0, plain-len(lit))
	}
	return nil
}

// memberName decodes a key, a JSON string the scan already found to be good text.
func memberName(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return ""
	}
	return name
}

// digits skips decimal digits at s.i and returns how many there were.
func (s *contentScan) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

// allZeroDigits reports whether the mantissa of the number literal lit has only zero digits.
func allZeroDigits(lit []byte) bool {
	for _, c := range lit {
		switch {
		case c == 'e' || c == 'E':
			return true
		case c >= '1' && c <= '9':
			return false
		}
	}
	return true
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
