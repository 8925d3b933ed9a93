package rest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/transport/rest"
)

// TestIdempotencyKeyTellsPathFromQuery: the request an Idempotency-Key is kept for is its path
// as sent, so a path holding an escaped "?" or "/" is never taken for another path with a query
// or more elements: the same key with such a request is 409 idempotency_key_reused, not the
// other request's answer.
func TestIdempotencyKeyTellsPathFromQuery(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true, more: true})
	tok := s.token(t, s.tenant, 7)
	body := `{"provider":"webhook","token":"https://example.com/hook"}`
	put := func(path string) answer {
		return s.do(t, req{method: http.MethodPut, path: path, body: body, key: "dev", token: tok})
	}
	first := put("/v1/im/push/devices/a?b?")
	expect(t, "device a, with a query", first, http.StatusOK, "ok")
	if first.data(t)["device_id"] != "a" {
		t.Fatalf("device: %s", first.Raw)
	}
	other := put("/v1/im/push/devices/a%3Fb")
	expect(t, "device a?b with the same key", other, http.StatusConflict, rest.ReasonIdempotencyKeyReused)

	del := func(path string) answer {
		return s.do(t, req{method: http.MethodDelete, path: path, key: "del", token: tok})
	}
	expect(t, "remove member 5/mute", del("/v1/im/groups/1/members/5%2Fmute"), http.StatusBadRequest, rest.ReasonInvalid)
	expect(t, "unmute member 5 with the same key", del("/v1/im/groups/1/members/5/mute"), http.StatusConflict, rest.ReasonIdempotencyKeyReused)
}

// TestBodyPropertyNamesAreCaseSensitive: a body member is named exactly as documented. One that
// differs only in case is an unknown property (400 invalid, reason schema) and writes nothing,
// so a second spelling can never carry a value past the checks the documented one passed.
func TestBodyPropertyNamesAreCaseSensitive(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{})
	tok := s.token(t, s.tenant, 7)
	for i, tt := range []struct{ body, field string }{
		{`{"Name":"design"}`, ""},
		{`{"name":"design","NAME":"` + repeat("n", 200) + `"}`, "NAME"},
		{`{"name":"design","settings":{"join_approval":false,"who_may_invite":"owner","WHO_MAY_INVITE":"nobody","who_may_announce":"admin","mute_all":false}}`, "settings.WHO_MAY_INVITE"},
	} {
		a := s.do(t, req{method: http.MethodPost, path: "/v1/im/groups", body: tt.body, key: "g" + string(rune('a'+i)), token: tok})
		expect(t, tt.body, a, http.StatusBadRequest, rest.ReasonInvalid)
		if a.Body.Details["reason"] != "schema" || tt.field != "" && a.Body.Details["field"] != tt.field {
			t.Errorf("%s: details %v, want field %s, reason schema", tt.body, a.Body.Details, tt.field)
		}
	}
	if n := s.count(t, "SELECT count(*) FROM events"); n != 0 {
		t.Fatalf("refused bodies wrote %d events", n)
	}
}

// TestParameterErrorsNameTheParameter: an error about a path or query parameter names it in
// details.field as its other errors do (limit, ban, device_id), never with the location prefix
// of the schema validator (query.limit).
func TestParameterErrorsNameTheParameter(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true, more: true})
	tok := s.token(t, s.tenant, 7)
	for i, tt := range []struct {
		method, path, field, reason string
	}{
		{http.MethodGet, "/v1/im/conversations?limit=abc", "limit", "schema"},
		{http.MethodGet, "/v1/im/conversations?limit=101", "limit", "schema"},
		{http.MethodGet, "/v1/im/conversations?cursor=%ff", "cursor", "bad_text"},
		{http.MethodGet, "/v1/im/conversations?cursor=abc", "cursor", "bad_format"},
		{http.MethodDelete, "/v1/im/groups/1/members/8?ban=maybe", "ban", "schema"},
		{http.MethodPut, "/v1/im/push/devices/" + repeat("d", 65), "device_id", "schema"},
		{http.MethodPut, "/v1/im/push/devices/d%00", "device_id", "bad_text"},
	} {
		body := ""
		if tt.method == http.MethodPut {
			body = `{"provider":"webhook","token":"https://example.com/hook"}`
		}
		a := s.do(t, req{method: tt.method, path: tt.path, body: body, token: tok, key: "p" + string(rune('a'+i))})
		expect(t, tt.method+" "+tt.path, a, http.StatusBadRequest, rest.ReasonInvalid)
		if a.Body.Details["field"] != tt.field || a.Body.Details["reason"] != tt.reason {
			t.Errorf("%s %s: details %v, want field %s, reason %s", tt.method, tt.path, a.Body.Details, tt.field, tt.reason)
		}
	}
}

// TestAnswerIsStoredWhenTheClientGoesAway: a write that ran to its end keeps its answer for its
// Idempotency-Key even when its client went away before the answer was stored, which is when
// the client needs it: the retry gets the answer replayed, and the command does not run twice.
func TestAnswerIsStoredWhenTheClientGoesAway(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{})
	ctx := testCtx(t)
	tok := s.token(t, s.tenant, 7)
	// Storing an answer waits for advisory lock 7001, held here, so the client can leave before
	// its answer is stored.
	if _, err := s.pool.Exec(ctx, `CREATE FUNCTION hold_answer() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock(7001); RETURN NEW; END $$;
		CREATE TRIGGER hold_answer BEFORE UPDATE ON http_idempotency
		FOR EACH ROW WHEN (NEW.status_code IS NOT NULL) EXECUTE FUNCTION hold_answer()`); err != nil {
		t.Fatal(err)
	}
	lock, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_lock(7001)`); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hr, err := http.NewRequestWithContext(cctx, http.MethodPost, s.srv.URL+"/v1/im/groups", strings.NewReader(`{"name":"design"}`))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+tok)
	hr.Header.Set(rest.HeaderIdempotencyKey, "create")
	done := make(chan error, 1)
	go func() {
		resp, err := s.srv.Client().Do(hr)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	for s.count(t, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel() // the client gives up while its answer is being stored
	if err := <-done; err == nil {
		t.Fatal("the request ended before the client left")
	}
	time.Sleep(200 * time.Millisecond) // the server sees the client leave
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_unlock(7001)`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.count(t, `SELECT count(*) FROM http_idempotency WHERE key = 'create' AND status_code IS NULL`) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	retry := s.do(t, req{method: http.MethodPost, path: "/v1/im/groups", body: `{"name":"design"}`, key: "create", token: tok})
	expect(t, "the retry", retry, http.StatusCreated, "ok")
	if retry.Header.Get(rest.HeaderIdempotentReplayed) != "true" {
		t.Fatalf("the retry was not a replay: %s", retry.Raw)
	}
	if n := s.count(t, `SELECT count(*) FROM events WHERE event_type LIKE 'group.created%'`); n != 1 {
		t.Fatalf("%d groups created, want 1", n)
	}
}
