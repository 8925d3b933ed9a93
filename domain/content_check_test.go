package domain_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/imledger/imledger/domain"
)

// nested returns a value depth arrays (or objects) deep around 1.
func nested(depth int, object bool) string {
	if object {
		return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
	}
	return strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth)
}

// manyKeys returns an object with n keys k0 to k<n-1> and, when extra is not empty, one more
// key written as extra.
func manyKeys(n int, extra string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	if extra != "" {
		b.WriteString(extra + ":0,")
	}
	return strings.TrimSuffix(b.String(), ",") + "}"
}

func TestNewContentAcceptsWhatEveryStoreKeeps(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`"hi"`, `1`, `-0`, `0`, `true`, `false`, ` {"a" : [1, 2.5, {"b":null}], "c":"x"} `, `[]`, `{}`, `{"":1}`,
		`"\ud83d\ude00 and 😀, é, \u00e9, \uffff, \/, \"quoted\", \\, \b\f\n\r\t"`, "\"\u2028\"",
		`0.5e-3`, `1E+2`, `-12.75e1`, `1.7976931348623157e308`, `-1.7976931348623157e308`, `5e-324`, `0e-5`, `0.000e9`,
		`123456789012345678901234567890`, `[` + strings.Repeat("9", 300) + `]`,
		nested(domain.MaxContentDepth, false), nested(domain.MaxContentDepth, true),
		`{"a":[{"b":[{"c":[` + nested(domain.MaxContentDepth-6, false) + `]}]}]}`,
		`{"a":{"a":1},"b":[{"a":1},{"a":2}],"A":3,"a ":4}`, manyKeys(40, ""),
	} {
		c, err := domain.NewContent([]byte(raw), 1<<20)
		if err != nil {
			t.Errorf("NewContent(%.60q) = %v, want accepted", raw, err)
			continue
		}
		if string(c.Raw()) != raw {
			t.Errorf("NewContent(%.60q) kept %.60q, want the bytes as sent", raw, c.Raw())
		}
	}
}

func TestNewContentRefusesWhatAStoreRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, raw, reason string
	}{
		{"40 arrays deep, 81 bytes", nested(40, false), domain.ReasonTooDeep},
		{"one level too deep", nested(domain.MaxContentDepth+1, false), domain.ReasonTooDeep},
		{"objects one level too deep", nested(domain.MaxContentDepth+1, true), domain.ReasonTooDeep},
		{"mixed nesting too deep", strings.Repeat(`[{"k":`, 11) + "1" + strings.Repeat("}]", 11), domain.ReasonTooDeep},
		{"escaped NUL", `"a\u0000b"`, domain.ReasonBadText},
		{"escaped NUL in a key", `{"a\u0000":1}`, domain.ReasonBadText},
		{"unpaired high surrogate", `"\ud800"`, domain.ReasonBadText},
		{"high surrogate before text", `"\ud800x"`, domain.ReasonBadText},
		{"high surrogate before a non-surrogate escape", `"\uD800\u0041"`, domain.ReasonBadText},
		{"two high surrogates", `"\ud800\ud800"`, domain.ReasonBadText},
		{"lone low surrogate", `"\udc00"`, domain.ReasonBadText},
		{"lone low surrogate in a key", `{"\uDFFF":1}`, domain.ReasonBadText},
		{"raw surrogate", "\"\xed\xa0\x80\"", domain.ReasonBadText},
		{"invalid UTF-8", "\"\xff\"", domain.ReasonBadText},
		{"truncated UTF-8", "[\"\xe2\x82\"]", domain.ReasonBadText},
		{"overlong UTF-8", "\"\xc0\xaf\"", domain.ReasonBadText},
		{"overflowing number", `1e400`, domain.ReasonBadNumber},
		{"overflowing negative number", `[-1e400]`, domain.ReasonBadNumber},
		{"just beyond the largest double", `1.7976931348623159e308`, domain.ReasonBadNumber},
		{"huge integer", strings.Repeat("9", 310), domain.ReasonBadNumber},
		{"underflowing number", `{"x":1e-400}`, domain.ReasonBadNumber},
		{"underflowing plain number", "0." + strings.Repeat("0", 400) + "1", domain.ReasonBadNumber},
		{"exponent far beyond", `1e99999999999999999999`, domain.ReasonBadNumber},
		{"numbers that grow beyond the limit when written out", `[1e300, 1e300, 1e300, 1e300]`, "too_large"},
		{"unterminated", `{"a":1`, "bad_json"},
		{"trailing comma", `[1,]`, "bad_json"},
		{"leading zero", `01`, "bad_json"},
		{"bare dot", `1.`, "bad_json"},
		{"two values", `1 2`, "bad_json"},
		{"raw control character", "\"a\x01b\"", "bad_json"},
		{"bad escape", `"\q"`, "bad_json"},
		{"short unicode escape", `"\u12"`, "bad_json"},
		{"missing colon", `{"a" 1}`, "bad_json"},
		{"unquoted key", `{a:1}`, "bad_json"},
		{"truncated literal", `tru`, "bad_json"},
		{"duplicate key", `{"a":1,"a":2}`, domain.ReasonDuplicateKey},
		{"duplicate key written with an escape", `{"a":1,"\u0061":2}`, domain.ReasonDuplicateKey},
		{"duplicate escaped key", `{"\n":1,"\u000a":2}`, domain.ReasonDuplicateKey},
		{"duplicate key in a nested object", `[1,{"x":{"k":1,"y":[],"k":{}}}]`, domain.ReasonDuplicateKey},
		{"duplicate key after a nested object", `{"a":{"b":1},"c":2,"a":3}`, domain.ReasonDuplicateKey},
		{"duplicate key among many", manyKeys(40, `"k7"`), domain.ReasonDuplicateKey},
		{"duplicate key among many, with escapes", manyKeys(40, `"\u006b39"`), domain.ReasonDuplicateKey},
		{"empty", ``, "required"},
		{"null", `null`, "required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := domain.NewContent([]byte(tc.raw), 1024)
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, domain.ErrInvalid) {
				t.Fatalf("NewContent(%.60q) = %v, want a *domain.ValidationError", tc.raw, err)
			}
			if ve.Field != "content" || ve.Reason != tc.reason {
				t.Errorf("NewContent(%.60q) refused as %s/%s (%s), want content/%s", tc.raw, ve.Field, ve.Reason, ve.Detail, tc.reason)
			}
		})
	}
}

func TestStoredSizeCountsNumbersWrittenOutInFull(t *testing.T) {
	t.Parallel()
	c, err := domain.NewContent([]byte(`[1e300,2.5E-3,7]`), 0)
	if err != nil {
		t.Fatal(err)
	}
	// 1e300 is stored as 301 digits, 2.5E-3 as 0.0025: at most 1+300 and 1+1+4 bytes.
	if got, least := c.StoredSize(), c.Size()-len("1e300")-len("2.5E-3")+301+len("0.0025"); got < least || got > least+4 {
		t.Errorf("StoredSize = %d, want about %d (Size %d)", got, least, c.Size())
	}
	plain, _ := domain.NewContent([]byte(`{"n":[1,2.50,-0]}`), 0)
	if plain.StoredSize() != plain.Size() {
		t.Errorf("StoredSize of content without exponents = %d, want its Size %d", plain.StoredSize(), plain.Size())
	}
}

func TestTextContentRefusesNUL(t *testing.T) {
	t.Parallel()
	var ve *domain.ValidationError
	if _, err := domain.TextContent("a\x00b", 0); !errors.As(err, &ve) || ve.Reason != domain.ReasonBadText {
		t.Errorf("TextContent with NUL = %v, want content/bad_text", err)
	}
}

// FuzzNewContentAgreesWithJSONValid checks the content scanner against encoding/json: what it
// accepts is valid JSON, and what it calls bad_json is not.
func FuzzNewContentAgreesWithJSONValid(f *testing.F) {
	for _, s := range []string{`"hi"`, `{"a":[1,2.5e3,{"b":null}]}`, `[1,]`, `01`, `-`, `"\ud83d\ude00"`, `"\u00"`,
		`1e5`, `{"a" :1 , "b":[ ]}`, " \t\n1\r", `[true,false,null]`, `"\"`, `{"a":}`, `[-0.0e-0]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, err := domain.NewContent(raw, 1<<20)
		var ve *domain.ValidationError
		switch {
		case err == nil && !json.Valid(raw):
			t.Fatalf("accepted %q, which encoding/json calls invalid", raw)
		case errors.As(err, &ve) && ve.Reason == "bad_json" && json.Valid(raw):
			t.Fatalf("refused %q as bad_json, which encoding/json accepts", raw)
		}
	})
}

// richContent is a typical rich message: text with mentions, formatting spans and an attachment.
var richContent = []byte(`{"txt":"Meeting moved to 3pm — see the notes 📎 @alice @bob","fmt":[{"at":0,"len":7,"tp":"ST"},` +
	`{"at":25,"len":9,"tp":"LN"}],"ent":[{"tp":"LN","data":{"url":"https://example.com/notes?id=42"}},` +
	`{"tp":"EX","data":{"mime":"application/pdf","name":"notes.pdf","size":48213,"ref":"oss/7f/3a.pdf"}}]}`)

// BenchmarkNewContent measures the content check on a typical rich message and on 64 KiB of
// text, next to encoding/json's Valid (what it replaces) for scale.
func BenchmarkNewContent(b *testing.B) {
	text, _ := json.Marshal(strings.Repeat("lorem ipsum dolor sit amet, 敏捷的棕色狐狸 ", 1300)[:60000])
	for _, in := range []struct {
		name string
		raw  []byte
	}{{"rich", richContent}, {"text64k", text}} {
		b.Run(fmt.Sprintf("%s/NewContent", in.name), func(b *testing.B) {
			b.SetBytes(int64(len(in.raw)))
			for b.Loop() {
				if _, err := domain.NewContent(in.raw, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("%s/json.Valid", in.name), func(b *testing.B) {
			b.SetBytes(int64(len(in.raw)))
			for b.Loop() {
				if !json.Valid(in.raw) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
