package wsbench

import (
	"bytes"
	"strconv"
	"strings"
)

// A benchmark message's content is a JSON object written the way no JSON encoder would write it:
// with spaces after the separators and "<&>" in the padding, which encoding/json escapes. A
// gateway that decoded and re-encoded the content, instead of passing the sender's bytes through,
// changes it, and the receiver counts the delivery as a content_mismatch error.
//
//	{"bench_ts": 1700000000000000000, "from": 7, "k": 42, "pad": "<&>xxxx"}

// contentFields are what a receiver reads back from a content.
type contentFields struct {
	SentNS int64
	From   int
	K      int
}

// padding returns the pad of a content of about n bytes.
func padding(n int) string {
	const fixed = len(`{"bench_ts": 1700000000000000000, "from": 0, "k": 0, "pad": "<&>"}`)
	return "<&>" + strings.Repeat("x", max(n-fixed, 0))
}

// appendContent appends the content of message k of client from, sent at sentNS.
func appendContent(b []byte, sentNS int64, from, k int, pad string) []byte {
	b = append(b, `{"bench_ts": `...)
	b = strconv.AppendInt(b, sentNS, 10)
	b = append(b, `, "from": `...)
	b = strconv.AppendInt(b, int64(from), 10)
	b = append(b, `, "k": `...)
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, `, "pad": "`...)
	b = append(b, pad...)
	return append(b, `"}`...)
}

// checkContent reads a delivered content and reports whether its bytes are exactly the ones its
// sender wrote with pad (every client uses the same). ok is false when it is no benchmark
// content at all. scratch is reused for the rebuilt content and returned.
func checkContent(raw []byte, pad string, scratch []byte) (f contentFields, exact, ok bool, _ []byte) {
	err := members(raw, func(key, value []byte) bool {
		switch string(key) {
		case "bench_ts":
			var isInt bool
			f.SentNS, isInt = integer(value)
			ok = isInt && f.SentNS > 0
		case "from":
			n, _ := integer(value)
			f.From = int(n)
		case "k":
			n, _ := integer(value)
			f.K = int(n)
		}
		return true
	})
	if err != nil || !ok {
		return f, false, false, scratch
	}
	scratch = appendContent(scratch[:0], f.SentNS, f.From, f.K, pad)
	return f, bytes.Equal(raw, scratch), true, scratch
}
