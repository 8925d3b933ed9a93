package ws

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const asyncAPIURL = "https://imledger.test/asyncapi.json"

// asyncAPIDoc decodes the embedded document and returns it with a compiler that resolves
// references into it.
func asyncAPIDoc(t *testing.T) (map[string]any, *jsonschema.Compiler) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(AsyncAPIDocument()))
	if err != nil {
		t.Fatalf("asyncapi.json: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7) // AsyncAPI's default schema format is a superset of draft 7
	c.AssertFormat()
	if err := c.AddResource(asyncAPIURL, doc); err != nil {
		t.Fatal(err)
	}
	return doc.(map[string]any), c
}

func obj(v any, path ...string) map[string]any {
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	m, _ := v.(map[string]any)
	return m
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Every message of the document compiles as a JSON Schema, its examples validate against it, and
// the channel and the operations name only messages that exist.
func TestAsyncAPIDocumentIsCoherent(t *testing.T) {
	t.Parallel()
	doc, c := asyncAPIDoc(t)
	if doc["asyncapi"] != "3.0.0" {
		t.Fatalf("asyncapi %v, want 3.0.0", doc["asyncapi"])
	}
	messages := obj(doc, "components", "messages")
	if len(messages) == 0 {
		t.Fatal("no messages")
	}
	for _, name := range keys(messages) {
		sch, err := c.Compile(asyncAPIURL + "#/components/messages/" + name + "/payload")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		examples, _ := obj(messages, name)["examples"].([]any)
		if len(examples) == 0 {
			t.Errorf("%s: no example", name)
		}
		for i, ex := range examples {
			if err := sch.Validate(obj(ex)["payload"]); err != nil {
				t.Errorf("%s: example %d does not validate: %v", name, i, err)
			}
		}
	}
	channel := obj(doc, "channels", "gateway", "messages")
	if !slices.Equal(keys(channel), keys(messages)) {
		t.Errorf("the channel lists %v, the components %v", keys(channel), keys(messages))
	}
	for name, m := range channel {
		if ref := obj(m)["$ref"]; ref != "#/components/messages/"+name {
			t.Errorf("channel message %s refers to %v", name, ref)
		}
	}
	covered := map[string]bool{}
	for opName, op := range obj(doc, "operations") {
		lists, _ := obj(op)["messages"].([]any)
		if reply := obj(op, "reply"); reply != nil {
			more, _ := reply["messages"].([]any)
			lists = append(lists, more...)
		}
		for _, m := range lists {
			ref, _ := obj(m)["$ref"].(string)
			name, ok := strings.CutPrefix(ref, "#/channels/gateway/messages/")
			if !ok || channel[name] == nil {
				t.Errorf("operation %s names %q", opName, ref)
			}
			covered[name] = true
		}
	}
	for name := range messages {
		if !covered[name] {
			t.Errorf("message %s is in no operation", name)
		}
	}
}

// The client frames of the document have exactly the fields of the Go types the gateway decodes
// them into, so a field added to a frame cannot be left out of the document.
func TestAsyncAPIClientFramesMatchTheDecoder(t *testing.T) {
	t.Parallel()
	doc, _ := asyncAPIDoc(t)
	messages := obj(doc, "components", "messages")
	for typ, fields := range frameFields {
		props := obj(messages, typ, "payload", "properties", typ, "properties")
		if props == nil {
			t.Errorf("client frame %s is not in the document", typ)
			continue
		}
		want := slices.Clone(fields)
		sort.Strings(want)
		if got := keys(props); !slices.Equal(got, want) {
			t.Errorf("%s: the document has fields %v, the decoder %v", typ, got, want)
		}
	}
}

// reasonsIn collects every reason a ctrl message of the document allows.
func reasonsIn(doc map[string]any, names ...string) map[string]bool {
	out := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if r := obj(x, "properties", "reason"); r != nil {
				if s, ok := r["const"].(string); ok {
					out[s] = true
				}
				enum, _ := r["enum"].([]any)
				for _, e := range enum {
					if s, ok := e.(string); ok {
						out[s] = true
					}
				}
			}
			for _, v := range x {
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	for _, n := range names {
		walk(obj(doc, "components", "messages", n, "payload"))
	}
	return out
}

// Every stable reason of the gateway is in the document, and the changes the notifier pushes are
// the ones the document lists.
func TestAsyncAPIListsEveryReasonAndChange(t *testing.T) {
	t.Parallel()
	doc, _ := asyncAPIDoc(t)
	errs := reasonsIn(doc, "ctrlError")
	for _, r := range []string{ReasonBadFrame, ReasonUnknownFrame, ReasonInvalid, ReasonFrameTooLarge, ReasonNotAuthenticated,
		ReasonTokenInvalid, ReasonTokenExpired, ReasonAlreadyAuthenticated, ReasonNotMember, ReasonTooManyTopics, ReasonNotFound,
		ReasonConflict, ReasonInProgress, ReasonRateLimited, ReasonRetry, ReasonNotImplemented, ReasonInternal,
		ReasonTokenRevoked, ReasonUserBanned, ReasonTenantSuspended, ReasonTenantNotFound} {
		if !errs[r] {
			t.Errorf("reason %s is not in ctrlError", r)
		}
	}
	ended := reasonsIn(doc, "ctrlSessionEnded")
	for _, r := range []string{ReasonTokenExpired, ReasonTokenRevoked, ReasonKicked, ReasonUserBanned, ReasonTenantSuspended, ReasonTenantNotFound} {
		if !ended[r] {
			t.Errorf("reason %s is not in ctrlSessionEnded", r)
		}
	}
	var want []string
	for _, w := range changeWhat {
		want = append(want, w)
	}
	sort.Strings(want)
	var got []string
	for _, w := range obj(doc, "components", "messages", "infoTopicChange", "payload", "properties", "info", "properties", "what")["enum"].([]any) {
		got = append(got, w.(string))
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("infoTopicChange lists %v, the notifier pushes %v", got, want)
	}
	hello := obj(doc, "components", "messages", "ctrlHello", "payload", "properties", "ctrl", "properties", "params", "properties", "ver")
	if hello["const"] != ProtocolVersion {
		t.Errorf("ctrlHello ver %v, the gateway answers %q", hello["const"], ProtocolVersion)
	}
}

func TestAsyncAPIHandler(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		method string
		status int
		body   bool
	}{
		{http.MethodGet, http.StatusOK, true},
		{http.MethodHead, http.StatusOK, false},
		{http.MethodPost, http.StatusMethodNotAllowed, false},
	} {
		w := httptest.NewRecorder()
		AsyncAPIHandler().ServeHTTP(w, httptest.NewRequest(c.method, AsyncAPIPath, nil))
		if w.Code != c.status {
			t.Errorf("%s: %d, want %d", c.method, w.Code, c.status)
			continue
		}
		if c.status != http.StatusOK {
			continue
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", c.method, ct)
		}
		if c.body != (w.Body.Len() > 0) {
			t.Errorf("%s: body of %d bytes", c.method, w.Body.Len())
		}
		if c.body && !json.Valid(w.Body.Bytes()) {
			t.Errorf("%s: body is not JSON", c.method)
		}
	}
}
