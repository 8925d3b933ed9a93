package domain_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/imledger/imledger/domain"
)

// TestCheckBodyTextNamesTheMember: text a decoder would rewrite, \u0000 and numbers no double
// holds are refused with the top-level member that holds them; other bodies, malformed ones
// included, pass to the decoder.
func TestCheckBodyTextNamesTheMember(t *testing.T) {
	t.Parallel()
	cases := []struct{ body, field, reason string }{
		{`{"password":"` + "\xff\xfe" + `"}`, "password", domain.ReasonBadText},
		{`{"a":1,"password":"x\ud800"}`, "password", domain.ReasonBadText},
		{`{"name":"\udc00\ud800"}`, "name", domain.ReasonBadText},
		{`{"name":"a\u0000"}`, "name", domain.ReasonBadText},
		{`{"content":{"deep":["` + "\xed\xa0\x80" + `"]}}`, "content", domain.ReasonBadText},
		{`{"c\u006fntent":1e400}`, "content", domain.ReasonBadNumber},
		{`{"ttl_seconds":-1e-400}`, "ttl_seconds", domain.ReasonBadNumber},
		{`{"` + "\xff" + `":1}`, "body", domain.ReasonBadText},
		{`"\ud800"`, "body", domain.ReasonBadText},
		{`{"a":` + "\xff" + `}`, "body", domain.ReasonBadText},
	}
	for _, c := range cases {
		var ve *domain.ValidationError
		if err := domain.CheckBodyText([]byte(c.body)); !errors.As(err, &ve) || ve.Field != c.field || ve.Reason != c.reason {
			t.Errorf("CheckBodyText(%q) = %v, want %s/%s", c.body, err, c.field, c.reason)
		}
	}
	for _, body := range []string{
		``, `{}`, `{"name":"héllo \ud83d\ude00","n":1e300,"z":0e-400}`, `{"a":`, `{"a":1}x`,
		strings.Repeat("[", 100) + strings.Repeat("]", 100), `{"content":"\ufffd"}`,
	} {
		if err := domain.CheckBodyText([]byte(body)); err != nil {
			t.Errorf("CheckBodyText(%q) = %v, want nil", body, err)
		}
	}
}

// TestDescribeJSONErrorNamesNoGoTypes: decoding errors are told in JSON's terms.
func TestDescribeJSONErrorNamesNoGoTypes(t *testing.T) {
	t.Parallel()
	var into struct {
		TTL  int     `json:"ttl_seconds"`
		Seq  int64   `json:"seq,string"`
		List []int64 `json:"list"`
	}
	cases := []struct{ body, want string }{
		{`{"ttl_seconds":1e3}`, "ttl_seconds: number 1e3 where a whole number (no fraction or exponent) in the field's range is expected"},
		{`{"list":5}`, "list: number where an array is expected"},
		{`{"seq":5}`, "the JSON does not fit the expected fields and types"},
		{`{"ttl_seconds":}`, "malformed JSON at byte 16"},
	}
	for _, c := range cases {
		err := json.Unmarshal([]byte(c.body), &into)
		if got := domain.DescribeJSONError(err); got != c.want {
			t.Errorf("DescribeJSONError(%s) = %q (from %v), want %q", c.body, got, err, c.want)
		}
	}
	var v any
	if got := domain.DescribeJSONError(json.Unmarshal([]byte(`1e400`), &v)); got != "number 1e400 where a number within the range of a double is expected" {
		t.Errorf("1e400 into any: %q", got)
	}
}
