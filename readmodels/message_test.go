package readmodels_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
)

func TestMessageJSONCarriesIDsAsStringsAndNoRecalledContent(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 8, 25, 4, 0, 0, 0, time.UTC)
	m := readmodels.Message{
		Topic: "grp7", Seq: 9007199254740993, From: 9007199254740995, MsgType: domain.MsgText,
		Status: readmodels.StatusRecalled, Content: json.RawMessage(`"secret"`), Head: &domain.Head{MentionAll: true},
		Version: 2, SentAt: at, UpdatedAt: at, RecalledAt: &at, RecalledBy: 9007199254740995,
	}
	m.Redact()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"seq": "9007199254740993", "from": "9007199254740995", "recalled_by": "9007199254740995", "status": "recalled", "content": nil}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v (%s)", k, got[k], v, b)
		}
	}
	if _, has := got["head"]; has {
		t.Errorf("recalled message carries a head: %s", b)
	}
	if _, has := got["to"]; has {
		t.Errorf("group message carries a receiver: %s", b)
	}
}
