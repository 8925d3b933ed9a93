package fanout

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

// TestDataEncodingIsStable pins the wire form of data, info and pres messages: nodes of
// different versions exchange them during a rolling upgrade, and the fields control messages
// added must not appear in them.
func TestDataEncodingIsStable(t *testing.T) {
	t.Parallel()
	grp, err := domain.ParseTopic("grp7")
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 11, 29, 7, 55, 43, 667_000_000, time.UTC)
	tenant := domain.MustTenantID("acme")
	cases := []struct {
		m    *Message
		want string
	}{
		{&Message{Kind: KindData, Tenant: tenant, Topic: grp, From: 42, Seq: 9, MessageID: "m-1", MsgType: domain.MsgText,
			Head: &domain.Head{ReplySeq: 3}, TS: ts, Content: json.RawMessage(`{"t": "<b>"}`), SkipSession: "s1"},
			`{"kind":"data","tenant":"acme","topic":"grp7","from":"42","seq":"9","message_id":"m-1","msg_type":"text",` +
				`"head":{"reply_seq":"3"},"ts":"2026-11-29T07:55:43.667Z","skip_session":"s1"}` + "\n" + `{"t": "<b>"}`},
		{&Message{Kind: KindInfo, Tenant: tenant, Topic: grp, From: 42, What: "kp", TS: ts},
			`{"kind":"info","tenant":"acme","topic":"grp7","from":"42","ts":"2026-11-29T07:55:43.667Z","what":"kp"}` + "\n"},
		{&Message{Kind: KindControl, Tenant: tenant, Topic: grp, From: 1, Src: 42, What: "removed", Drop: DropUser, TS: ts},
			`{"kind":"control","tenant":"acme","topic":"grp7","from":"1","ts":"2026-11-29T07:55:43.667Z","what":"removed",` +
				`"src":"42","drop":"user"}` + "\n"},
		{&Message{Kind: KindControl, Tenant: tenant, Topic: grp, What: "dissolved", Drop: DropAll, TS: ts},
			`{"kind":"control","tenant":"acme","topic":"grp7","ts":"2026-11-29T07:55:43.667Z","what":"dissolved","drop":"all"}` + "\n"},
	}
	for _, c := range cases {
		b, err := encode(c.m)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%s encodes as\n%s\nwant\n%s", c.m.Kind, b, c.want)
		}
		back, err := decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if back.From != c.m.From || back.Src != c.m.Src || back.Drop != c.m.Drop || back.What != c.m.What || back.Seq != c.m.Seq {
			t.Errorf("%s decodes as %+v", c.m.Kind, back)
		}
	}
}
