package rest_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/imledger/imledger/transport/rest"
)

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{})
	tok := s.token(t, s.tenant, 7)
	send := func(key, body string) answer {
		return s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", body: body, key: key, token: tok})
	}
	first := send("key-1", `{"client_msg_id":"c-1","content":"hello"}`)
	expect(t, "first", first, http.StatusCreated, "ok")
	// Stored answers keep the encoding every answer has: compact, in the envelope's field order
	// (not PostgreSQL's jsonb rendering).
	if !strings.HasPrefix(first.Raw, `{"code":201,"data":{"topic":"grp1","client_msg_id":"c-1","seq":"1",`) {
		t.Errorf("a stored answer is not in the API's JSON style: %s", first.Raw)
	}
	if first.Header.Get(rest.HeaderIdempotentReplayed) != "" {
		t.Error("the first answer is marked replayed")
	}
	again := send("key-1", `{ "content": "hello",  "client_msg_id": "c-1" }`)
	if again.Status != first.Status || again.Raw != first.Raw {
		t.Fatalf("replay differs:\nfirst  %d %s\nreplay %d %s", first.Status, first.Raw, again.Status, again.Raw)
	}
	if again.Header.Get(rest.HeaderIdempotentReplayed) != "true" {
		t.Errorf("replay without %s: %v", rest.HeaderIdempotentReplayed, again.Header)
	}
	if again.Header.Get(rest.HeaderRequestID) == first.Body.RequestID {
		t.Error("the replaying request got the first request's X-Request-ID")
	}
	if n := s.count(t, "SELECT count(*) FROM events"); n != 1 {
		t.Fatalf("%d events after a replay, want 1", n)
	}

	reused := send("key-1", `{"client_msg_id":"c-2","content":"other"}`)
	expect(t, "same key, other body", reused, http.StatusConflict, rest.ReasonIdempotencyKeyReused)
	reusedPath := s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp2/messages", body: `{"client_msg_id":"c-1","content":"hello"}`, key: "key-1", token: tok})
	expect(t, "same key and body, other path", reusedPath, http.StatusConflict, rest.ReasonIdempotencyKeyReused)
	expect(t, "no key", send("", `{"client_msg_id":"c-3","content":"x"}`), http.StatusBadRequest, rest.ReasonIdempotencyKeyRequired)
	bad := send("bad-key-\u00e9", `{"client_msg_id":"c-3","content":"x"}`)
	expect(t, "malformed key", bad, http.StatusBadRequest, rest.ReasonInvalid)
	if n := s.count(t, "SELECT count(*) FROM events"); n != 1 {
		t.Fatalf("refused requests wrote events: %d, want 1", n)
	}

	// Keys belong to their user: another user's key-1 is another key.
	mine := s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", body: `{"client_msg_id":"c-1","content":"hello"}`,
		key: "key-1", token: s.token(t, s.tenant, 8)})
	expect(t, "another user's key", mine, http.StatusCreated, "ok")
	if mine.data(t)["seq"] != "2" {
		t.Errorf("another user's send: %s", mine.Raw)
	}
}

func TestIdempotencyKeyInProgressAndAbandoned(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{IdempotencyPendingTimeout: 30e9}, stackOpts{})
	tok := s.token(t, s.tenant, 7)
	body := `{"client_msg_id":"c-1","content":"hello"}`
	send := func(key string) answer {
		return s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", body: body, key: key, token: tok})
	}
	// Learn the request hash from a finished request, then fake claims of the same request.
	expect(t, "seed", send("seed"), http.StatusCreated, "ok")
	claim := func(key, age string) {
		t.Helper()
		if _, err := s.pool.Exec(testCtx(t), `INSERT INTO http_idempotency (tenant_id, user_id, key, request_hash, created_at, expires_at)
			SELECT tenant_id, user_id, $1, request_hash, now() - $2::interval, now() + interval '1 hour'
			FROM http_idempotency WHERE key = 'seed'`, key, age); err != nil {
			t.Fatal(err)
		}
	}
	claim("running", "1 second")
	claim("abandoned", "1 hour")
	expect(t, "while the first request runs", send("running"), http.StatusConflict, rest.ReasonInProgress)
	a := send("abandoned")
	if a.Status != http.StatusOK || a.data(t)["duplicate"] != true {
		t.Fatalf("a key abandoned mid-request runs again (the send dedupes by client_msg_id): %s", a.Raw)
	}
	if a.Header.Get(rest.HeaderIdempotentReplayed) != "" {
		t.Error("an abandoned claim was replayed")
	}
	if n := s.count(t, "SELECT count(*) FROM http_idempotency WHERE key = 'abandoned' AND status_code = 200"); n != 1 {
		t.Error("the retried request's answer was not stored")
	}
}

func TestIdempotencyKeyConcurrentRetries(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{})
	tok := s.token(t, s.tenant, 7)
	const n = 8
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[string]int{}
		bodies   = map[string]bool{}
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", body: `{"client_msg_id":"c-1","content":"x"}`,
				key: "shared", token: tok})
			mu.Lock()
			defer mu.Unlock()
			statuses[a.Body.Reason+":"+a.Header.Get(rest.HeaderIdempotentReplayed)]++
			if a.Body.Reason == "ok" {
				bodies[a.Raw] = true
			}
			_ = i
		}()
	}
	wg.Wait()
	if statuses["ok:"] != 1 || statuses["ok:"]+statuses["ok:true"]+statuses[rest.ReasonInProgress+":"] != n {
		t.Fatalf("outcomes %v: want one first answer, the rest replays or request_in_progress", statuses)
	}
	if len(bodies) != 1 {
		t.Fatalf("%d different success bodies, want 1", len(bodies))
	}
	if c := s.count(t, "SELECT count(*) FROM events"); c != 1 {
		t.Fatalf("%d events, want 1", c)
	}
}

func TestRejectedInputWritesNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{MaxBodyBytes: 4096, MaxContentBytes: 100}, stackOpts{})
	tok := s.token(t, s.tenant, 7)
	tests := []struct {
		name, topic, body string
		status            int
		details           map[string]any
	}{
		{"missing client_msg_id", "grp1", `{"content":"x"}`, 400, map[string]any{"field": "client_msg_id", "reason": "required"}},
		{"bad topic", "grpx", `{"client_msg_id":"c","content":"x"}`, 400, map[string]any{"field": "topic", "reason": "bad_format"}},
		{"not a party of the 1:1 topic", "p2p1_2", `{"client_msg_id":"c","content":"x"}`, 400, map[string]any{"field": "topic", "reason": "not_party"}},
		{"content over the limit", "grp1", `{"client_msg_id":"c","content":"` + repeat("a", 200) + `"}`, 400, map[string]any{"field": "content", "reason": "too_large"}},
		{"wrong JSON type", "grp1", `{"client_msg_id":5,"content":"x"}`, 400, map[string]any{"field": "client_msg_id", "reason": "schema"}},
		{"unknown property", "grp1", `{"client_msg_id":"c","content":"x","contnet":"y"}`, 400, map[string]any{"field": "contnet", "reason": "schema"}},
		{"malformed JSON", "grp1", `{"client_msg_id":"c",`, 400, map[string]any{"field": "body", "reason": "bad_json"}},
		{"body over the limit", "grp1", `{"client_msg_id":"c","content":"` + repeat("a", 5000) + `"}`, 413, nil},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/" + tt.topic + "/messages", body: tt.body,
				key: "k" + string(rune('a'+i)), token: tok})
			reason := rest.ReasonInvalid
			if tt.status == 413 {
				reason = rest.ReasonTooLarge
			}
			expect(t, tt.name, a, tt.status, reason)
			for k, v := range tt.details {
				if a.Body.Details[k] != v {
					t.Errorf("details.%s = %v, want %v: %s", k, a.Body.Details[k], v, a.Raw)
				}
			}
		})
	}
	if n := s.count(t, "SELECT count(*) FROM events"); n != 0 {
		t.Errorf("rejected requests wrote %d events", n)
	}
	keys, err := s.rdb.Keys(testCtx(t), s.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("rejected sends left Redis keys %v", keys)
	}
}

func repeat(s string, n int) string {
	out := make([]byte, 0, len(s)*n)
	for range n {
		out = append(out, s...)
	}
	return string(out)
}

// TestIdempotencyKeyTakesInnerSpaces: a key is 1-255 printable ASCII characters, the space
// (0x20) included, as docs/clients.md says; it is kept and replayed like any other.
func TestIdempotencyKeyTakesInnerSpaces(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{})
	tok := s.token(t, s.tenant, 7)
	send := func(key string) answer {
		return s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", body: `{"client_msg_id":"c-1","content":"x"}`, key: key, token: tok})
	}
	first := send("a key with spaces ~!")
	expect(t, "a key with inner spaces", first, http.StatusCreated, "ok")
	again := send("a key with spaces ~!")
	if again.Raw != first.Raw || again.Header.Get(rest.HeaderIdempotentReplayed) != "true" {
		t.Fatalf("the same key again: %d %s, want the first answer replayed", again.Status, again.Raw)
	}
	expect(t, "another key differing in a space", send("a key with  spaces ~!"), http.StatusOK, "ok") // a duplicate send, not a replay
	expect(t, "a key past 255 characters", send(strings.Repeat("k", 256)), http.StatusBadRequest, rest.ReasonInvalid)
}

// TestContentTypeRefusalsAreNotStored: a JSON route takes application/json without a parameter
// or with charset=utf-8 in any case; another charset, another media type (merge-patch+json
// included) and a body without a Content-Type are 415 before the key is claimed, so the same key
// and body sent right then run.
func TestContentTypeRefusalsAreNotStored(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{})
	tok := s.token(t, s.tenant, 7)
	body := func(id string) string { return `{"client_msg_id":"` + id + `","content":"x"}` }
	send := func(key, ct, id string, noType bool) answer {
		return s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", body: body(id), key: key, token: tok,
			headers: map[string]string{"Content-Type": ct}, noType: noType})
	}
	for i, ct := range []string{"text/plain", "application/json; charset=latin1", "application/json; charset=utf-16",
		"application/merge-patch+json", "application/vnd.api+json", "application/json; foo=bar"} {
		key, id := fmt.Sprintf("ct-%d", i), fmt.Sprintf("c-%d", i)
		expect(t, "Content-Type "+ct, send(key, ct, id, false), http.StatusUnsupportedMediaType, rest.ReasonUnsupportedMediaType)
		expect(t, "the same key and body as application/json after "+ct, send(key, "application/json", id, false), http.StatusCreated, "ok")
	}
	expect(t, "a body without a Content-Type", send("none", "", "c-none", true), http.StatusUnsupportedMediaType, rest.ReasonUnsupportedMediaType)
	expect(t, "the same key and body as application/json", send("none", "application/json", "c-none", false), http.StatusCreated, "ok")
	for i, ct := range []string{"application/json; charset=utf-8", "Application/JSON; Charset=UTF-8", "application/json;charset=\"utf-8\""} {
		expect(t, "Content-Type "+ct, send(fmt.Sprintf("ok-%d", i), ct, fmt.Sprintf("ok-%d", i), false), http.StatusCreated, "ok")
	}
	a := s.do(t, req{method: http.MethodPatch, path: "/v1/im/users/me", token: tok, key: "mp", body: `{"nickname":"n"}`,
		headers: map[string]string{"Content-Type": "application/merge-patch+json"}})
	expect(t, "PATCH as merge-patch+json", a, http.StatusUnsupportedMediaType, rest.ReasonUnsupportedMediaType)
	if n := s.count(t, `SELECT count(*) FROM events WHERE tenant_id = $1`, s.tenant.String()); n != 10 {
		t.Fatalf("%d events, want 10: one per send that was accepted", n)
	}
}
