package schemaapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/jsonschema"
	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/transport/schemaapi"
)

func get(t *testing.T, srv *httptest.Server, path string) (*http.Response, []byte) {
	t.Helper()
	res, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, body
}

func TestSchemasAreServedWithAnIndex(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle(schemaapi.Path, schemaapi.Handler(kafka.Config{TopicPrefix: "prod."}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	res, body := get(t, srv, "/v1/schemas/")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("index: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	var idx schemaapi.Index
	if err := json.Unmarshal(body, &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.EventTypes) != len(domain.EventTypes()) {
		t.Fatalf("the index lists %d event types, the registry %d", len(idx.EventTypes), len(domain.EventTypes()))
	}
	found := map[string]schemaapi.EventType{}
	for _, e := range idx.EventTypes {
		found[e.EventType] = e
		res, doc := get(t, srv, e.Schema)
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/schema+json" {
			t.Errorf("%s: %d %s", e.Schema, res.StatusCode, res.Header.Get("Content-Type"))
			continue
		}
		if _, err := jsonschema.Compile(doc); err != nil {
			t.Errorf("%s: %v", e.Schema, err)
		}
	}
	if e := found[string(domain.EventGroupMessageSent)]; e.Topic != "prod.im.group.message.persist" || !e.Current || e.Version != 1 {
		t.Errorf("message.group.sent.v1: %+v", e)
	}
	if e := found[string(domain.EventMemberMutedV1)]; e.Current || e.SupersededBy != string(domain.EventMemberMuted) || e.Upcast == "" ||
		e.Topic != "prod.im.business.event" {
		t.Errorf("member.muted.v1: %+v", e)
	}
	if e := found[string(domain.EventSessionOpened)]; e.Topic != "prod.im.session.event" {
		t.Errorf("session.opened.v1: %+v", e)
	}
	if res, doc := get(t, srv, "/v1/schemas/envelope"); res.StatusCode != 200 || !json.Valid(doc) || idx.Envelope != "/v1/schemas/envelope.json" {
		t.Errorf("envelope: %d", res.StatusCode)
	}
	if res, _ := get(t, srv, "/v1/schemas/nope.v1.json"); res.StatusCode != 404 {
		t.Errorf("unknown schema: %d", res.StatusCode)
	}
	post, err := http.Post(srv.URL+"/v1/schemas/envelope.json", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != 405 {
		t.Errorf("POST: %d, want 405", post.StatusCode)
	}
}
