package readmodels

import (
	"strings"
	"unicode/utf8"
)

// FitChars returns s as valid UTF-8 of at most n characters, for a text column of n characters
// (MySQL refuses a row whose text is not valid UTF-8, and with it the statement's other rows).
func FitChars(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i < len(s) && count < n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		count++
	}
	return s[:i]
}
