package rest_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/rest"
)

// expectInvalid fails unless a is 400 invalid with details {field, reason}.
func expectInvalid(t *testing.T, what string, a answer, field, reason string) {
	t.Helper()
	if a.Status != http.StatusBadRequest || a.Body.Reason != rest.ReasonInvalid ||
		a.Body.Details["field"] != field || a.Body.Details["reason"] != reason {
		t.Errorf("%s: got %d %s, want 400 invalid %s/%s", what, a.Status, a.Raw, field, reason)
	}
}

// TestBodyTextADecoderWouldChangeIsRefused sends JSON bodies whose text encoding/json would
// rewrite to U+FFFD (invalid UTF-8, lone surrogate escapes) or that hold \u0000, to every kind of
// endpoint: each is 400 invalid {field: the member, reason: bad_text} before anything is decoded
// or written: the account does not exist afterwards, and the Idempotency-Key of a refused write
// was not claimed.
func TestBodyTextADecoderWouldChangeIsRefused(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true, more: true})
	tok := s.token(t, s.tenant, 1)
	tenant := `"tenant":"` + s.tenant.String() + `"`
	cases := []struct {
		name, method, path, body, field string
	}{
		{"register, invalid UTF-8 password", http.MethodPost, "/v1/im/auth/register",
			`{` + tenant + `,"login":"dave1","password":"` + "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8" + `"}`, "password"},
		{"register, lone surrogate password", http.MethodPost, "/v1/im/auth/register",
			`{` + tenant + `,"login":"dave1","password":"abcdefgh\ud800"}`, "password"},
		{"register, NUL in password", http.MethodPost, "/v1/im/auth/register",
			`{` + tenant + `,"login":"dave1","password":"abcd\u0000efgh"}`, "password"},
		{"register, U+FFFD password", http.MethodPost, "/v1/im/auth/register",
			`{` + tenant + `,"login":"dave1","password":"\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd"}`, "password"},
		{"register, invalid UTF-8 nickname", http.MethodPost, "/v1/im/auth/register",
			`{` + tenant + `,"login":"dave1","password":"correct horse","nickname":"` + "\xc0\x80" + `"}`, "nickname"},
		{"login, invalid UTF-8 password", http.MethodPost, "/v1/im/auth/login",
			`{` + tenant + `,"login":"dave1","password":"` + "\x80\x81\x82\x83\x84\x85\x86\x87" + `"}`, "password"},
		{"group name", http.MethodPost, "/v1/im/groups", `{"name":"` + "a\xffb" + `"}`, "name"},
		{"group name, low surrogate", http.MethodPost, "/v1/im/groups", `{"name":"\udc00"}`, "name"},
		{"nickname", http.MethodPatch, "/v1/im/users/me", `{"nickname":"` + "\xed\xa0\x80" + `"}`, "nickname"},
		{"friend request message", http.MethodPost, "/v1/im/friends/requests", `{"user_id":"2","message":"hi\u0000"}`, "message"},
		{"device platform", http.MethodPut, "/v1/im/push/devices/d1", `{"provider":"jpush","token":"abc","platform":"` + "\xff" + `"}`, "platform"},
		{"content", http.MethodPost, "/v1/im/topics/p2p1_2/messages", `{"client_msg_id":"c1","content":{"t":"` + "\xff" + `"}}`, "content"},
		{"a key", http.MethodPost, "/v1/im/groups", `{"name":"g","` + "\xff" + `":1}`, "body"},
		{"not UTF-8 outside a string", http.MethodPost, "/v1/im/groups", `{"name":` + "\xff" + `}`, "body"},
	}
	for i, c := range cases {
		r := req{method: c.method, path: c.path, body: c.body}
		if !strings.HasPrefix(c.path, "/v1/im/auth/") {
			r.token, r.key = tok, "bad-"+string(rune('a'+i))
		}
		expectInvalid(t, c.name, s.do(t, r), c.field, domain.ReasonBadText)
	}

	// Nothing was written: the login is free, and the refused group's key was not claimed.
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login",
		body: `{` + tenant + `,"login":"dave1","password":"\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd"}`})
	expect(t, "login after the refused registrations", a, http.StatusUnauthorized, rest.ReasonInvalidCredentials)
	a = s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/register",
		body: `{` + tenant + `,"login":"dave1","password":"correct horse"}`})
	expect(t, "register after the refused ones", a, http.StatusCreated, "ok")
	a = s.do(t, req{method: http.MethodPost, path: "/v1/im/groups", token: tok, key: "bad-g", body: `{"name":"Design"}`})
	expect(t, "group with the key of a refused request", a, http.StatusCreated, "ok")
}

// TestFreeTextPathParameterIsRefused puts a device id that is not UTF-8 or holds a control
// character in the path: 400 invalid {field: device_id, reason: bad_text}, never the 500 of
// MySQL refusing it nor a stored NUL. Other path parameters answer the same.
func TestFreeTextPathParameterIsRefused(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true, more: true})
	tok := s.token(t, s.tenant, 1)
	for i, id := range []string{"%ff", "%C0%80", "a%ffb", "%00", "a%0Ab", "%ED%A0%80"} {
		a := s.do(t, req{method: http.MethodPut, path: "/v1/im/push/devices/" + id, token: tok, key: "put-" + string(rune('a'+i)),
			body: `{"provider":"jpush","token":"abc"}`})
		expectInvalid(t, "PUT device "+id, a, "device_id", domain.ReasonBadText)
		a = s.do(t, req{method: http.MethodDelete, path: "/v1/im/push/devices/" + id, token: tok, key: "del-" + string(rune('a'+i))})
		expectInvalid(t, "DELETE device "+id, a, "device_id", domain.ReasonBadText)
	}
	a := s.do(t, req{method: http.MethodGet, path: "/v1/im/users/%ff", token: tok})
	expectInvalid(t, "GET user %ff", a, "uid", domain.ReasonBadText)
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/conversations?cursor=%ff", token: tok})
	expectInvalid(t, "conversations cursor %ff", a, "cursor", domain.ReasonBadText)
	a = s.do(t, req{method: http.MethodPut, path: "/v1/im/push/devices/d%C3%A9", token: tok, key: "put-ok",
		body: `{"provider":"jpush","token":"abc"}`})
	expect(t, "PUT device dé", a, http.StatusOK, "ok")
}

// goInternals matches what encoding/json's errors say of Go: "Go value of type float64",
// "Go struct field Head.mentions of type []domain.UserID", "json: invalid use of ,string".
var goInternals = regexp.MustCompile(`Go (value|struct|type)|of type|int64|float64|domain\.|,string|(^|[^_])json: `)

// TestJSONErrorsAreToldInJSONTerms sends numbers that no double holds and values Go cannot
// decode into a field: content 1e400 is content/bad_number as documented, and no answer's
// message or details name Go types.
func TestJSONErrorsAreToldInJSONTerms(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true, more: true})
	tok := s.token(t, s.tenant, 1)
	created := s.do(t, req{method: http.MethodPost, path: "/v1/im/groups", token: tok, key: "g", body: `{"name":"Design"}`})
	expect(t, "create group", created, http.StatusCreated, "ok")
	topic := "grp" + created.data(t)["group_id"].(string)
	send := "/v1/im/topics/" + topic + "/messages"
	cases := []struct {
		name, method, path, body, field, reason string
	}{
		{"content 1e400", http.MethodPost, send, `{"client_msg_id":"n1","content":1e400}`, "content", domain.ReasonBadNumber},
		{"content [-1e400]", http.MethodPost, send, `{"client_msg_id":"n2","content":[-1e400]}`, "content", domain.ReasonBadNumber},
		{"edit content 1e400", http.MethodPatch, send + "/1", `{"version":"1","content":1e400}`, "content", domain.ReasonBadNumber},
		{"head mentions a number", http.MethodPost, send, `{"client_msg_id":"n3","content":"x","head":{"mentions":5}}`, "head", "bad_json"},
		{"head reply_seq unquoted", http.MethodPost, send, `{"client_msg_id":"n4","content":"x","head":{"reply_seq":5}}`, "head", "bad_json"},
		{"ttl_seconds 1e3", http.MethodPost, "/v1/im/action-tokens", `{"action":"join_group","subject":"` + topic + `","ttl_seconds":1e3}`, "body", "schema"},
		{"ttl_seconds 1e400", http.MethodPost, "/v1/im/action-tokens", `{"action":"join_group","subject":"` + topic + `","ttl_seconds":1e400}`, "ttl_seconds", domain.ReasonBadNumber},
	}
	for i, c := range cases {
		a := s.do(t, req{method: c.method, path: c.path, token: tok, key: "k" + string(rune('a'+i)), body: c.body})
		expectInvalid(t, c.name, a, c.field, c.reason)
		if goInternals.MatchString(a.Raw) {
			t.Errorf("%s: the answer names Go internals: %s", c.name, a.Raw)
		}
	}
}

// TestBadMentionIDsAreBadFormat: a send whose head mentions a string that is not a user id
// ("abc", "0", "-1") is 400 invalid head.mentions/bad_format, as docs/clients.md lists, and writes
// nothing; a mention that is not a string is still head/bad_json.
func TestBadMentionIDsAreBadFormat(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{})
	tok := s.token(t, s.tenant, 7)
	for i, m := range []string{`"abc"`, `"0"`, `"-1"`, `"8","x"`} {
		a := s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", token: tok, key: "m" + string(rune('a'+i)),
			body: `{"client_msg_id":"c` + string(rune('a'+i)) + `","content":"x","head":{"mentions":[` + m + `]}}`})
		expectInvalid(t, "mentions "+m, a, "head.mentions", "bad_format")
	}
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", token: tok, key: "mn",
		body: `{"client_msg_id":"cn","content":"x","head":{"mentions":[8]}}`})
	expectInvalid(t, "mentions [8]", a, "head", "bad_json")
	if n := s.count(t, `SELECT count(*) FROM events WHERE tenant_id = $1`, s.tenant.String()); n != 0 {
		t.Fatalf("the refused sends wrote %d events", n)
	}
}

// TestEmptyRequiredBodyIsRequired: a JSON route that requires a body and gets none is 400
// invalid body/required, not a malformed-JSON answer.
func TestEmptyRequiredBodyIsRequired(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{})
	tok := s.token(t, s.tenant, 7)
	for _, ct := range []string{"application/json", ""} {
		a := s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", token: tok, key: "empty" + ct,
			headers: map[string]string{"Content-Type": ct}})
		expectInvalid(t, "an empty body as "+ct, a, "body", "required")
	}
}
