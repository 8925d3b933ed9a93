package userchan

import (
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

func TestEraseContentRewritesOnlyTheUsersMessage(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	topic, err := domain.ParseTopic("p2p7_42")
	if err != nil {
		t.Fatal(err)
	}
	item := func(from domain.UserID, content string) string {
		it := Item{What: WhatConv, Topic: topic, From: from, At: at,
			Message: &Message{Seq: 1, From: from, SentAt: at, Content: []byte(content)}}
		return string(withSeq(it.body(), 3, "e"))
	}
	for _, c := range []struct {
		name, item string
		ok         bool
		want       string
	}{
		{"the erased user's message", item(7, `{"text":"hi \"},\"ts\":\""}`), true, item(7, string(domain.ErasedContent))},
		{"another user's message", item(42, `"hello"`), false, ""},
		{"a user whose id starts alike", item(70, `"hello"`), false, ""},
		{"already erased", item(7, string(domain.ErasedContent)), false, ""},
		{"an item without a message", string(withSeq(Item{What: WhatRead, Topic: topic, At: at}.body(), 4, "e")), false, ""},
	} {
		got, ok := eraseContent(c.item, `"message":{"seq":"`, `","from":"7"`)
		if ok != c.ok || got != c.want {
			t.Errorf("%s: %q, %v; want %q, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
