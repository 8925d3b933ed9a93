package wsbench

import (
	"bytes"
	"errors"
	"strconv"
)

// The load client reads tens of thousands of frames a second on the same cores as the server it
// measures, so it does not decode them with encoding/json: it walks an object's top-level members
// once, without allocating, and hands out their raw values. It checks structure, not every rule of
// JSON; what it compares (ack ids, content bytes) it compares exactly.

var errScan = errors.New("wsbench: malformed JSON")

// members calls fn with each top-level member of the JSON object b: its key as written between
// the quotes, and its raw value. It stops early when fn returns false.
func members(b []byte, fn func(key, value []byte) bool) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errScan
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for i < len(b) {
		if b[i] != '"' {
			return errScan
		}
		end, err := skipString(b, i)
		if err != nil {
			return err
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return errScan
		}
		i = skipSpace(b, i+1)
		start := i
		if i, err = skipValue(b, i); err != nil {
			return err
		}
		if !fn(key, b[start:i]) {
			return nil
		}
		i = skipSpace(b, i)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return nil
		default:
			return errScan
		}
	}
	return errScan
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errScan
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errScan
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errScan
	}
	j := i // a number, true, false or null
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
		j++
	}
	if j == i {
		return 0, errScan
	}
	return j, nil
}

// plainString returns the text of a raw JSON string without escapes; ok is false for anything
// else (the benchmark's ids and user ids never need escapes).
func plainString(raw []byte) (s []byte, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || bytes.IndexByte(raw, '\\') >= 0 {
		return nil, false
	}
	return raw[1 : len(raw)-1], true
}

// integer parses a raw JSON integer.
func integer(raw []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(raw), 10, 64) // no allocation: the conversion does not escape
	return n, err == nil
}
