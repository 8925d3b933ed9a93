package domain_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/imledger/imledger/domain"
)

// TestHeadMentionsThatAreNotUserIDsAreBadFormat: a head decodes mentions as user id strings; a
// string that is not one is head.mentions/bad_format (a value rule, as Validate's), while a
// mention of another JSON type stays a JSON error.
func TestHeadMentionsThatAreNotUserIDsAreBadFormat(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`{"mentions":["abc"]}`, `{"mentions":["0"]}`, `{"mentions":["-1"]}`, `{"mentions":["7",""]}`,
		`{"mentions":["99999999999999999999"]}`, `{"mention_all":true,"mentions":["1.5"]}`} {
		var h domain.Head
		err := json.Unmarshal([]byte(raw), &h)
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != "head.mentions" || ve.Reason != "bad_format" || !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("%s: %v, want head.mentions/bad_format", raw, err)
		}
	}
	for _, raw := range []string{`{"mentions":[5]}`, `{"mentions":"5"}`, `{"mentions":[null, 5]}`} {
		var h domain.Head
		err := json.Unmarshal([]byte(raw), &h)
		var ve *domain.ValidationError
		if err == nil || errors.As(err, &ve) {
			t.Errorf("%s: %v, want a JSON error", raw, err)
		}
	}
	var h domain.Head
	raw := `{"mentions":["43","usr44"],"mention_all":true,"reply_seq":"3","root_seq":"2","files":["01a23b00-0000-7000-8000-000000000000"]}`
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.Mentions, []domain.UserID{43, 44}) || !h.MentionAll || h.ReplySeq != 3 || h.RootSeq != 2 || len(h.Files) != 1 {
		t.Fatalf("decoded head %+v", h)
	}
	out, err := json.Marshal(h)
	if err != nil || string(out) != `{"mentions":["43","44"],"mention_all":true,"reply_seq":"3","root_seq":"2","files":["01a23b00-0000-7000-8000-000000000000"]}` {
		t.Fatalf("encoded head %s %v", out, err)
	}
}

// TestHeadNegativeSeqsNameTheirField: a negative reply_seq or root_seq is bad_format of the
// field the client got wrong.
func TestHeadNegativeSeqsNameTheirField(t *testing.T) {
	t.Parallel()
	for raw, field := range map[string]string{
		`{"reply_seq":"-1"}`:                 "head.reply_seq",
		`{"root_seq":"-1"}`:                  "head.root_seq",
		`{"reply_seq":"3","root_seq":"-2"}`:  "head.root_seq",
		`{"reply_seq":"-3","root_seq":"-2"}`: "head.reply_seq",
	} {
		var h domain.Head
		if err := json.Unmarshal([]byte(raw), &h); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		err := h.Validate()
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != field || ve.Reason != "bad_format" {
			t.Errorf("%s: %v, want %s/bad_format", raw, err, field)
		}
	}
}
