package rest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/rest"
)

// TestContentNoStoreKeepsIsRefused sends and edits with content that MariaDB or PostgreSQL would
// refuse: every request is answered 400 invalid with details {field: content, reason}, and
// nothing is written: no seq is taken, no claim key exists, no event is appended.
func TestContentNoStoreKeepsIsRefused(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{})
	tenant := domain.MustTenantID("acme")
	alice := s.token(t, tenant, 1)
	const topic = "p2p1_2"
	send := func(key, body string) answer {
		return s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/" + topic + "/messages", token: alice, key: key, body: body})
	}
	expect(t, "first send", send("k0", `{"client_msg_id":"ok","content":"v1"}`), http.StatusCreated, "ok")

	keys, err := seq.New(s.rdb, seq.Config{KeyPrefix: s.prefix})
	if err != nil {
		t.Fatal(err)
	}
	p2p, _ := domain.ParseTopic(topic)
	bad := []struct{ name, content, reason string }{
		{"deep", strings.Repeat("[", 40) + strings.Repeat("]", 40), domain.ReasonTooDeep},
		{"nul", `"\u0000"`, domain.ReasonBadText},
		{"surrogate", `{"t":"\ud800"}`, domain.ReasonBadText},
		{"raw", "\"\xed\xa0\x80\"", domain.ReasonBadText},
		{"number", `[1e-400]`, domain.ReasonBadNumber},
		{"overflow", `1e400`, domain.ReasonBadNumber},
	}
	for _, b := range bad {
		a := send("send-"+b.name, `{"client_msg_id":"`+b.name+`","content":`+b.content+`}`)
		expect(t, "send of "+b.name+" content", a, http.StatusBadRequest, rest.ReasonInvalid)
		if a.Body.Details["field"] != "content" || a.Body.Details["reason"] != b.reason {
			t.Errorf("send of %s content: details %v, want content/%s", b.name, a.Body.Details, b.reason)
		}
		cmid, _ := domain.NewClientMsgID(b.name)
		if n := s.rdb.Exists(testCtx(t), keys.ClaimKey(seq.Key{Tenant: tenant, Topic: p2p, From: 1, ClientMsgID: cmid})).Val(); n != 0 {
			t.Errorf("a claim was written for the refused %s send", b.name)
		}

		a = s.do(t, req{method: http.MethodPatch, path: "/v1/im/topics/" + topic + "/messages/1", token: alice, key: "edit-" + b.name,
			body: `{"version":"1","content":` + b.content + `}`})
		expect(t, "edit with "+b.name+" content", a, http.StatusBadRequest, rest.ReasonInvalid)
		if a.Body.Details["field"] != "content" || a.Body.Details["reason"] != b.reason {
			t.Errorf("edit with %s content: details %v, want content/%s", b.name, a.Body.Details, b.reason)
		}
	}
	if last, ok, err := keys.LastSeq(testCtx(t), tenant, p2p); err != nil || !ok || last != 1 {
		t.Errorf("counter after the refused sends = %d (exists %v, %v), want 1", last, ok, err)
	}
	if n := s.count(t, `SELECT count(*) FROM events`); n != 1 {
		t.Errorf("%d events stored, want the first message only", n)
	}
	a := send("k1", `{"client_msg_id":"ok2","content":"v2"}`)
	expect(t, "next send", a, http.StatusCreated, "ok")
	if a.data(t)["seq"] != "2" {
		t.Errorf("next send = %s, want seq 2", a.Raw)
	}
}
