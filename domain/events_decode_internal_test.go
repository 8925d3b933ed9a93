package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// randomSent is a MessageSent with random fields; plain keeps every string free of what JSON
// escapes, so the payload is in the canonical form the scanner must take.
func randomSent(r *rand.Rand, plain bool) MessageSent {
	str := func() string {
		alphabet := "abcXYZ019-_.:/ éü中文"
		if !plain {
			alphabet += "\"\\\n\t<>&\u2028"
		}
		rs := []rune(alphabet)
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteRune(rs[r.IntN(len(rs))])
		}
		return b.String()
	}
	m := MessageSent{MessageID: str(), Topic: str(), Seq: r.Int64N(1 << 40), From: UserID(1 + r.Int64N(1<<50)),
		ClientMsgID: str(), MsgType: MsgType(str()),
		SentAt: time.Unix(r.Int64N(2e9), r.Int64N(1e9)).UTC()}
	if r.IntN(2) == 0 {
		m.GroupID = 1 + r.Int64N(1<<40)
	} else {
		m.To = UserID(1 + r.Int64N(1<<40))
	}
	contents := []any{str(), map[string]any{"txt": str(), "fmt": []any{map[string]any{"at": 1, "len": 2.5e3, "tp": "ST"}}},
		[]any{true, false, nil, -0.5, "x"}, 12345, map[string]any{}}
	m.Content, _ = json.Marshal(contents[r.IntN(len(contents))])
	if r.IntN(3) == 0 {
		m.Head = Head{Mentions: []UserID{UserID(1 + r.Int64N(99)), 7}, MentionAll: r.IntN(2) == 0, ReplySeq: r.Int64N(100),
			Files: []string{str()}}
	}
	return m
}

// jsonbForm re-encodes a JSON object as PostgreSQL's jsonb prints it: keys by length then bytes,
// ", " and ": " between them.
func jsonbForm(t *testing.T, payload []byte) []byte {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(payload, &fields); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteString(": ")
		b.Write(fields[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// checkSame decodes payload into a copy of start with the scanner and with json.Unmarshal; when
// the scanner takes it, both must succeed with the same value. It reports whether the scanner
// took it.
func checkSame(t *testing.T, payload []byte, start MessageSent) bool {
	t.Helper()
	orig := start
	orig.Head.Mentions = slices.Clone(start.Head.Mentions)
	fast := start // shares start's slices, as a caller's value would
	took := decodeMessageSent(payload, &fast)
	if !took && (!reflect.DeepEqual(fast, orig) || !reflect.DeepEqual(start, orig)) {
		t.Fatalf("the scanner refused %q but changed the value: %+v", payload, fast)
	}
	start = orig
	std := start
	std.Head.Mentions = slices.Clone(start.Head.Mentions)
	err := json.Unmarshal(payload, &std)
	if took && err != nil {
		t.Fatalf("the scanner took %q, which encoding/json refuses: %v", payload, err)
	}
	if took && !reflect.DeepEqual(fast, std) {
		t.Fatalf("payload %q:\nscanner       %+v\nencoding/json %+v", payload, fast, std)
	}
	// Decode must answer as json.Unmarshal does, whichever way it went.
	viaDecode := start
	viaDecode.Head.Mentions = slices.Clone(start.Head.Mentions)
	derr := Envelope{Payload: payload}.Decode(&viaDecode)
	if (derr == nil) != (err == nil) || (err == nil && !reflect.DeepEqual(viaDecode, std)) {
		t.Fatalf("Decode of %q: %+v, %v; encoding/json: %+v, %v", payload, viaDecode, derr, std, err)
	}
	return took
}

func TestDecodeMessageSentMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		plain := i%3 != 0
		m := randomSent(r, plain)
		payload, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range [][]byte{payload, jsonbForm(t, payload)} {
			took := checkSame(t, p, MessageSent{})
			if plain && !took {
				t.Fatalf("the scanner refused the canonical payload %q", p)
			}
		}
	}
}

// A payload that leaves fields out keeps what the value held, as with json.Unmarshal.
func TestDecodeMessageSentKeepsFieldsThePayloadLeavesOut(t *testing.T) {
	t.Parallel()
	start := MessageSent{Topic: "grp9", Seq: 4, Head: Head{Mentions: []UserID{3}}, Content: json.RawMessage(`"old"`)}
	for _, p := range []string{`{}`, `{"seq":"5"}`, `{"content":"new","head":{}}`, `{"head":{"mention_all":true}}`,
		`{"head":{"mentions":["5"]}}`} {
		if !checkSame(t, []byte(p), start) {
			t.Errorf("the scanner refused %s", p)
		}
	}
	// Refused after the head was read: the value's mentions stay as they were.
	if checkSame(t, []byte(`{"head":{"mentions":["5"]},"seq":01}`), MessageSent{Head: Head{Mentions: []UserID{3}}}) {
		t.Error("the scanner took a bad seq")
	}
}

func TestDecodeMessageSentLeavesTheRestToEncodingJSON(t *testing.T) {
	t.Parallel()
	refused := []string{
		`{"topic":"a\"b"}`,                  // an escape
		`{"topic":"a\u00e9"}`,               // an escape
		`{"Topic":"grp1"}`,                  // encoding/json matches keys without case
		`{"topic":"grp1","extra":1}`,        // a key it does not know
		`{"seq":"1","seq":"2"}`,             // a repeated key
		`{"content":null}`,                  // null
		`{"head":null}`,                     // null
		`{"head":[]}`,                       // not an object: encoding/json refuses it
		`{"from":5}`,                        // a number where a string goes
		`{"from":"0"}`,                      // not a user id
		`{"seq":"01"}`,                      // not a JSON integer
		`{"seq":"9223372036854775808"}`,     // past int64
		`{"seq":" 1"}`,                      // space inside the quotes
		`{"seq":1}`,                         // not quoted
		`{"topic":"grp1"} x`,                // trailing data
		`{"topic":"grp1",}`,                 // trailing comma
		`{"content":[1,2,}`,                 // broken content
		`{"content":"\x01"}`,                // a control character
		"{\"topic\":\"\xff\"}",              // invalid UTF-8
		`{"sent_at":"yesterday"}`,           // not a time
		`{"head":{"mentions":["x"]}}`,       // a head encoding/json refuses
		`["topic"]`,                         // not an object
		`{"content":01}`,                    // a bad number
		`{"content":"a\q"}`,                 // a bad escape
		`{"content":{"a" 1}}`,               // a missing colon
		`{"sent_at":"2026-01-02T03:04:05Z"`, // unterminated
	}
	for _, p := range refused {
		if checkSame(t, []byte(p), MessageSent{}) {
			t.Errorf("the scanner took %s", p)
		}
	}
	taken := []string{
		` { "topic" : "grp1" , "seq" : "-0" } `,
		`{"content":{"a":[1,-2.5e+3,true,false,null,"\u00e9\n"]},"head":{ }}`,
		`{"to":"usr42","from":"+7","msg_type":"中文"}`,
		`{"sent_at":"2026-01-02T03:04:05.123456789+08:00"}`,
	}
	for _, p := range taken {
		if !checkSame(t, []byte(p), MessageSent{}) {
			t.Errorf("the scanner refused %s", p)
		}
	}
}

// Random damage to canonical payloads: whatever the scanner still takes, encoding/json takes
// and decodes alike.
func TestDecodeMessageSentUnderDamage(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	tookDamaged := 0
	for range 20000 {
		payload, _ := json.Marshal(randomSent(r, true))
		if r.IntN(2) == 0 {
			payload = jsonbForm(t, payload)
		}
		if checkSame(t, damage(r, payload), MessageSent{}) {
			tookDamaged++
		}
	}
	if tookDamaged == 0 {
		t.Fatal("the scanner took no damaged payload: the test checks nothing")
	}
}

// damage changes one to three bytes of payload at random: replaced, inserted or deleted.
func damage(r *rand.Rand, payload []byte) []byte {
	junk := []byte(`{}[]",:\ 0123456789-+.eEtrufalsn` + "\x00\x1f\x7f\xc3\xa9\xff")
	for range 1 + r.IntN(3) {
		i := r.IntN(len(payload))
		switch r.IntN(3) {
		case 0:
			payload[i] = junk[r.IntN(len(junk))]
		case 1:
			payload = slices.Insert(payload, i, junk[r.IntN(len(junk))])
		default:
			payload = slices.Delete(payload, i, i+1)
		}
	}
	return payload
}

// The value scanner accepts exactly what json.Valid accepts, on values built at random and then
// damaged.
func TestScannerValueAgreesWithValid(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	var gen func(depth int) string
	gen = func(depth int) string {
		switch k := r.IntN(9); {
		case k == 0 && depth < 4:
			var parts []string
			for range r.IntN(4) {
				parts = append(parts, fmt.Sprintf("%q:%s", "k"+fmt.Sprint(r.IntN(9)), gen(depth+1)))
			}
			return "{" + strings.Join(parts, ",") + "}"
		case k == 1 && depth < 4:
			var parts []string
			for range r.IntN(4) {
				parts = append(parts, gen(depth+1))
			}
			return "[" + strings.Join(parts, " , ") + "]"
		case k == 2:
			return []string{"0", "-0", "12", "-3.25", "1e9", "2E-3", "0.5e+2"}[r.IntN(7)]
		case k == 3:
			return []string{"true", "false", "null"}[r.IntN(3)]
		default:
			return []string{`""`, `"abc"`, `"\u00e9\ud83d\ude00"`, `"\"\\\/\b\f\n\r\t"`, "\"é\xff\""}[r.IntN(5)]
		}
	}
	junk := []byte(`{}[]",:\ 0123456789-+.eEtrufalsnu` + "\x00\x1f\xff")
	for range 30000 {
		v := []byte(gen(0))
		if r.IntN(2) == 0 {
			for range 1 + r.IntN(2) {
				i := r.IntN(len(v))
				if r.IntN(2) == 0 {
					v[i] = junk[r.IntN(len(junk))]
				} else {
					v = slices.Insert(v, i, junk[r.IntN(len(junk))])
				}
			}
		}
		s := scanner{contentScan{b: v}}
		_, ok := s.value()
		ok = ok && s.end()
		// It refuses what json.Valid refuses, and valid JSON only for a rule of message content
		// (text, numbers, depth), never for its grammar.
		if ok != json.Valid(v) && (ok || !refusedByContentRule(v)) {
			t.Fatalf("%q: scanner %v, json.Valid %v", v, ok, json.Valid(v))
		}
	}
}

// refusedByContentRule reports whether checkContent refuses v for a rule beyond JSON's grammar.
func refusedByContentRule(v []byte) bool {
	_, err := checkContent(v)
	var ve *ValidationError
	return errors.As(err, &ve) && (ve.Reason == ReasonBadText || ve.Reason == ReasonBadNumber || ve.Reason == ReasonTooDeep ||
		ve.Reason == ReasonDuplicateKey)
}

// A value nested past what the scanner follows goes to encoding/json, which refuses the payload
// when the nesting passes its own limit.
func TestDeepNestingIsLeftToEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, depth := range []int{MaxContentDepth - 1, MaxContentDepth, MaxContentDepth + 1, 9999, 10000, 10001} {
		content := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		took := checkSame(t, []byte(`{"content":`+content+`}`), MessageSent{})
		if took != (depth <= MaxContentDepth) {
			t.Errorf("depth %d: scanner took it: %v", depth, took)
		}
		checkSameEnvelope(t, []byte(`{"payload":`+content+`}`))
	}
}

func FuzzDecodeMessageSent(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 20 {
		p, _ := json.Marshal(randomSent(r, r.IntN(2) == 0))
		f.Add(p)
	}
	f.Add([]byte(`{"content":{"a":[1,2,{"b":null}]},"head":{}}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		checkSame(t, payload, MessageSent{})
	})
}

func BenchmarkDecodeMessageSent(b *testing.B) {
	payload := []byte(`{"seq": "1", "from": "1", "head": {}, "topic": "grp1", "content": "benchmark message with a ` +
		`little bit of text in it", "sent_at": "2026-12-02T22:34:48.22020688Z", "group_id": "1", "msg_type": "text", ` +
		`"message_id": "grp1-1", "client_msg_id": "b0"}`)
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var m MessageSent
			if err := json.Unmarshal(payload, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Decode", func(b *testing.B) {
		env := Envelope{Payload: payload}
		for b.Loop() {
			var m MessageSent
			if err := env.Decode(&m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
