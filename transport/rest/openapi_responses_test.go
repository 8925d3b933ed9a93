package rest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/imledger/imledger/transport/rest"
)

// servedDocument fetches /openapi.json and returns it decoded, with a compiler that resolves
// references into it.
func (s *stack) servedDocument(t *testing.T) (map[string]any, *jsonschema.Compiler) {
	t.Helper()
	resp, err := s.srv.Client().Get(s.srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(documentURL, doc); err != nil {
		t.Fatal(err)
	}
	return doc.(map[string]any), c
}

const documentURL = "https://imledger.test/openapi.json"

// responseSchema compiles the schema the served document declares for method path's 200 answer.
func responseSchema(t *testing.T, doc map[string]any, c *jsonschema.Compiler, method, path string) *jsonschema.Schema {
	t.Helper()
	op, _ := doc["paths"].(map[string]any)[path].(map[string]any)[strings.ToLower(method)].(map[string]any)
	if op == nil {
		t.Fatalf("%s %s is not in the served document", method, path)
	}
	media := op["responses"].(map[string]any)["200"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)
	ref, _ := media["schema"].(map[string]any)["$ref"].(string)
	if !strings.HasPrefix(ref, "#/components/schemas/") {
		t.Fatalf("%s %s: 200 schema is %v, want a reference to a component", method, path, media["schema"])
	}
	sch, err := c.Compile(documentURL + ref)
	if err != nil {
		t.Fatalf("compile %s: %v", ref, err)
	}
	return sch
}

// Real answers of the history, the conversation list and the other reads validate against the
// schemas the server serves for them: 64-bit numbers (seqs, ids, the content version) are strings
// in both, and so is every field of a message's head.
func TestReadAnswersMatchTheServedOpenAPIDocument(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true})
	aliceID, alice := s.user(t, "alice")
	bobID, bob := s.user(t, "bob")
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/groups", token: alice, key: "g1", body: `{"name":"Design"}`})
	expect(t, "create group", a, http.StatusCreated, "ok")
	gid := a.data(t)["group_id"].(string)
	grp := "grp" + gid
	expect(t, "bob joins", s.do(t, req{method: http.MethodPost, path: "/v1/im/groups/" + gid + "/join", token: bob, key: "j1"}),
		http.StatusOK, "ok")
	send := func(token, topic, key, body string) {
		t.Helper()
		expect(t, "send "+key, s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/" + topic + "/messages", token: token,
			key: key, body: body}), http.StatusCreated, "ok")
	}
	send(alice, grp, "m1", `{"client_msg_id":"m1","content":{"text":"first"}}`)
	send(bob, grp, "m2", `{"client_msg_id":"m2","content":"@alice re first","head":{"mentions":["`+aliceID+`"],"reply_seq":"1","root_seq":"1"}}`)
	send(alice, grp, "m3", `{"client_msg_id":"m3","content":"oops"}`)
	expect(t, "edit", s.do(t, req{method: http.MethodPatch, path: "/v1/im/topics/" + grp + "/messages/1", token: alice, key: "e1",
		body: `{"version":"1","content":{"text":"first, edited"}}`}), http.StatusOK, "ok")
	expect(t, "recall", s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/" + grp + "/messages/3/recall", token: alice, key: "r1"}),
		http.StatusOK, "ok")
	p2p := "p2p" + aliceID + "_" + bobID
	if len(bobID) < len(aliceID) || len(bobID) == len(aliceID) && bobID < aliceID {
		p2p = "p2p" + bobID + "_" + aliceID
	}
	send(bob, p2p, "d1", `{"client_msg_id":"d1","content":"hi alice"}`)
	s.project(t)

	doc, c := s.servedDocument(t)
	reads := []struct{ route, path string }{
		{"/v1/im/topics/{topic}/messages", "/v1/im/topics/" + grp + "/messages?after_seq=0"},
		{"/v1/im/topics/{topic}/messages", "/v1/im/topics/" + p2p + "/messages"},
		{"/v1/im/conversations", "/v1/im/conversations"},
		{"/v1/im/groups/{gid}", "/v1/im/groups/" + gid},
		{"/v1/im/groups", "/v1/im/groups"},
		{"/v1/im/users/{uid}", "/v1/im/users/me"},
		{"/v1/im/unread", "/v1/im/unread"},
		{"/v1/im/topics/{topic}/unread", "/v1/im/topics/" + grp + "/unread"},
	}
	for _, r := range reads {
		a := s.do(t, req{method: http.MethodGet, path: r.path, token: alice})
		expect(t, r.path, a, http.StatusOK, "ok")
		body, err := jsonschema.UnmarshalJSON(strings.NewReader(a.Raw))
		if err != nil {
			t.Fatal(err)
		}
		if err := responseSchema(t, doc, c, http.MethodGet, r.route).Validate(body); err != nil {
			t.Errorf("GET %s: the answer does not match the served document: %v\n%s", r.path, err, a.Raw)
		}
	}

	// The wire types themselves, as docs/clients.md states them.
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/topics/" + grp + "/messages?after_seq=0", token: alice})
	var page struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(a.Body.Data, &page); err != nil || len(page.Messages) != 3 {
		t.Fatalf("history: %v: %s", err, a.Raw)
	}
	edited, reply, recalled := page.Messages[0], page.Messages[1], page.Messages[2]
	if edited["seq"] != "1" || edited["version"] != "2" || reply["version"] != "1" || recalled["version"] != "2" {
		t.Errorf("seq and version are not the strings docs/clients.md promises: %s", a.Raw)
	}
	head, _ := reply["head"].(map[string]any)
	if head["reply_seq"] != "1" || head["root_seq"] != "1" || head["mentions"].([]any)[0] != aliceID {
		t.Errorf("head: %v", reply["head"])
	}
	if recalled["status"] != "recalled" || recalled["recalled_by"] != aliceID || recalled["content"] != nil {
		t.Errorf("recalled message: %v", recalled)
	}
	l, raw := s.conversations(t, alice, "")
	if len(l.Conversations) != 2 || !strings.Contains(raw.Raw, `"version":"`) || strings.Contains(raw.Raw, `"version":1`) {
		t.Errorf("conversations' last messages: %s", raw.Raw)
	}
}

// The served document declares numbers only for what is sent as a JSON number and cannot reach
// 2^53: the envelope's code and a group's member_count (bounded by the group size limit). Every
// 64-bit value is a string, in the document as on the wire.
func TestOpenAPIDocumentDeclaresNoSixtyFourBitNumbers(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true})
	doc, _ := s.servedDocument(t)
	small := map[string]bool{"code": true, "member_count": true}
	var walk func(where string, sch any)
	walk = func(where string, sch any) {
		m, ok := sch.(map[string]any)
		if !ok {
			return
		}
		types := []any{m["type"]}
		if list, ok := m["type"].([]any); ok {
			types = list
		}
		name := where[strings.LastIndex(where, ".")+1:]
		for _, ty := range types {
			if (ty == "integer" || ty == "number") && !small[name] {
				t.Errorf("%s is a JSON %s in the document; 64-bit values are strings", where, ty)
			}
		}
		props, _ := m["properties"].(map[string]any)
		for k, v := range props {
			walk(where+"."+k, v)
		}
		walk(where+"[]", m["items"])
		walk(where+"{}", m["additionalProperties"])
	}
	for name, sch := range doc["components"].(map[string]any)["schemas"].(map[string]any) {
		walk(name, sch)
	}
}
