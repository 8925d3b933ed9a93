package rest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/imledger/imledger/commands"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/rest"
)

func TestSendMessageIsIdempotent(t *testing.T) {
	t.Parallel()
	env := newSendEnv(t, rest.Config{})
	body := `{"client_msg_id":"c-1","msg_type":"text","content":"hello","head":{"mentions":["8"]}}`
	h := dev("acme", "7")
	h[rest.HeaderRequestID] = "req-42"

	first := post(t, env.srv, "grp1", body, h)
	if first.Status != http.StatusCreated || first.Body.Reason != "ok" || first.Body.Data == nil ||
		first.Body.Data.Seq != "1" || first.Body.Data.Duplicate || first.Body.Data.MessageID == "" {
		t.Fatalf("first send: %s", first.Raw)
	}
	if first.Body.RequestID != "req-42" {
		t.Errorf("X-Request-ID not echoed: %s", first.Raw)
	}
	if !strings.Contains(first.Raw, `"seq":"1"`) {
		t.Errorf("seq must be a JSON string: %s", first.Raw)
	}

	again := post(t, env.srv, "grp1", body, dev("acme", "7"))
	if again.Status != http.StatusOK || !again.Body.Data.Duplicate || again.Body.Data.Seq != "1" ||
		again.Body.Data.MessageID != first.Body.Data.MessageID || again.Body.Data.SentAt != first.Body.Data.SentAt {
		t.Fatalf("repeated send: %s (first %s)", again.Raw, first.Raw)
	}
	if again.Body.RequestID == "req-42" {
		t.Errorf("request id must be generated when none is sent: %s", again.Raw)
	}

	next := post(t, env.srv, "grp1", `{"client_msg_id":"c-2","content":{"text":"rich"}}`, dev("acme", "usr7"))
	if next.Status != http.StatusCreated || next.Body.Data.Seq != "2" {
		t.Fatalf("second message: %s", next.Raw)
	}
	if n := countEvents(t, env.pool); n != 2 {
		t.Fatalf("events stored: %d, want 2", n)
	}
	if n := env.redisKeys(t); n == 0 {
		t.Fatal("sends left no Redis keys under the prefix: the key-prefix check below would prove nothing")
	}
}

func TestSendMessageRejectsBadInputAndWritesNothing(t *testing.T) {
	t.Parallel()
	env := newSendEnv(t, rest.Config{MaxBodyBytes: 4096, MaxContentBytes: 100})
	ok := dev("acme", "7")
	tests := []struct {
		name    string
		topic   string
		body    string
		headers map[string]string
		status  int
		reason  string
		details map[string]any
	}{
		{"missing client_msg_id", "grp1", `{"content":"x"}`, ok, 400, "invalid",
			map[string]any{"field": "client_msg_id", "reason": "required"}},
		{"client_msg_id too long", "grp1", `{"client_msg_id":"` + strings.Repeat("a", 65) + `","content":"x"}`, ok, 400, "invalid",
			map[string]any{"field": "client_msg_id", "reason": "too_long"}},
		{"bad topic", "grpx", `{"client_msg_id":"c","content":"x"}`, ok, 400, "invalid",
			map[string]any{"field": "topic", "reason": "bad_format"}},
		{"not a party of the 1:1 topic", "p2p1_2", `{"client_msg_id":"c","content":"x"}`, ok, 400, "invalid",
			map[string]any{"field": "topic", "reason": "not_party"}},
		{"null content", "grp1", `{"client_msg_id":"c","content":null}`, ok, 400, "invalid",
			map[string]any{"field": "content", "reason": "required"}},
		{"content over the limit", "grp1", `{"client_msg_id":"c","content":"` + strings.Repeat("a", 200) + `"}`, ok, 400, "invalid",
			map[string]any{"field": "content", "reason": "too_large"}},
		{"unknown msg_type", "grp1", `{"client_msg_id":"c","msg_type":"fax","content":"x"}`, ok, 400, "invalid",
			map[string]any{"field": "msg_type", "reason": "unknown"}},
		{"wrong JSON type", "grp1", `{"client_msg_id":5,"content":"x"}`, ok, 400, "invalid",
			map[string]any{"field": "client_msg_id", "reason": "schema"}},
		{"unknown property", "grp1", `{"client_msg_id":"c","content":"x","contnet":"y"}`, ok, 400, "invalid",
			map[string]any{"field": "contnet", "reason": "schema"}},
		{"malformed JSON", "grp1", `{"client_msg_id":"c",`, ok, 400, "invalid",
			map[string]any{"field": "body", "reason": "bad_json"}},
		{"body over the limit", "grp1", `{"client_msg_id":"c","content":"` + strings.Repeat("a", 5000) + `"}`, ok, 413, "too_large", nil},
		{"no user header", "grp1", `{"client_msg_id":"c","content":"x"}`, dev("acme", ""), 401, "unauthenticated",
			map[string]any{"header": rest.HeaderUser, "reason": "required"}},
		{"bad tenant header", "grp1", `{"client_msg_id":"c","content":"x"}`, dev("Acme!", "7"), 401, "unauthenticated",
			map[string]any{"header": rest.HeaderTenant, "reason": "bad_format"}},
	}
	t.Run("cases", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				a := post(t, env.srv, tt.topic, tt.body, tt.headers)
				if a.Status != tt.status || a.Body.Reason != tt.reason || a.Body.Data != nil {
					t.Fatalf("got %d %s, want %d %s", a.Status, a.Raw, tt.status, tt.reason)
				}
				for k, v := range tt.details {
					if a.Body.Details[k] != v {
						t.Errorf("details.%s = %v, want %v: %s", k, a.Body.Details[k], v, a.Raw)
					}
				}
			})
		}
	})
	if n := countEvents(t, env.pool); n != 0 {
		t.Errorf("rejected sends wrote %d events", n)
	}
	if n := env.redisKeys(t); n != 0 {
		t.Errorf("rejected sends left %d Redis keys", n)
	}
}

// failingSender answers every send with err: the HTTP mapping of handler failures is pure logic.
type failingSender struct{ err error }

func (f failingSender) Handle(context.Context, commands.SendMessage) (commands.SendResult, error) {
	return commands.SendResult{}, f.err
}

func TestSendMessageMapsHandlerErrors(t *testing.T) {
	t.Parallel()
	secret := errors.New(`pq: relation "events" does not exist at 10.0.0.5`)
	tests := []struct {
		err        error
		status     int
		reason     string
		retryAfter bool
	}{
		{domain.Deny("not_member"), 403, "forbidden", false},
		{fmt.Errorf("append: %w", domain.ErrConcurrency), 409, "conflict", false},
		{domain.ErrInProgress, 409, "in_progress", false},
		{domain.Retryable("redis", secret), 503, "unavailable", true},
		{context.DeadlineExceeded, 503, "unavailable", true},
		{secret, 500, "internal", false},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, rest.Config{}, failingSender{tt.err})
			a := post(t, srv, "grp1", `{"client_msg_id":"c","content":"x"}`, dev("acme", "7"))
			if a.Status != tt.status || a.Body.Reason != tt.reason {
				t.Fatalf("got %d %s, want %d %s", a.Status, a.Raw, tt.status, tt.reason)
			}
			if strings.Contains(a.Raw, "10.0.0.5") || strings.Contains(a.Raw, "relation") {
				t.Errorf("internal error text reached the client: %s", a.Raw)
			}
			if got := a.Header.Get("Retry-After") != ""; got != tt.retryAfter {
				t.Errorf("Retry-After present=%v, want %v", got, tt.retryAfter)
			}
		})
	}
}

func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	srv := newServer(t, rest.Config{Version: "v9"}, failingSender{})
	resp, err := srv.Client().Get(srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		OpenAPI string `json:"openapi"`
		Info    struct {
			Version string `json:"version"`
		} `json:"info"`
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name        string `json:"name"`
				In          string `json:"in"`
				Description string `json:"description"`
			} `json:"parameters"`
			Responses map[string]any `json:"responses"`
		} `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	op, ok := doc.Paths["/v1/im/topics/{topic}/messages"]["post"]
	if resp.StatusCode != 200 || doc.OpenAPI != "3.1.0" || doc.Info.Version != "v9" || !ok {
		t.Fatalf("status %d, openapi %q, version %q, send operation present %v", resp.StatusCode, doc.OpenAPI, doc.Info.Version, ok)
	}
	for _, code := range []string{"201", "400", "401", "503"} {
		if _, ok := op.Responses[code]; !ok {
			t.Errorf("response %s not documented", code)
		}
	}
	for _, p := range op.Parameters {
		if p.In == "header" && !strings.Contains(p.Description, "DEVELOPMENT ONLY") {
			t.Errorf("header %s not marked development-only: %q", p.Name, p.Description)
		}
	}
}
