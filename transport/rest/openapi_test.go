package rest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/rest"
)

// routes are every operation the API serves with all handlers configured.
var routes = []string{
	"POST /v1/im/auth/register", "POST /v1/im/auth/login",
	"POST /v1/im/topics/{topic}/messages", "GET /v1/im/topics/{topic}/messages",
	"POST /v1/im/topics/{topic}/messages/{seq}/recall", "PATCH /v1/im/topics/{topic}/messages/{seq}",
	"DELETE /v1/im/topics/{topic}/messages/{seq}", "POST /v1/im/topics/{topic}/read",
	"GET /v1/im/unread", "GET /v1/im/topics/{topic}/unread",
	"GET /v1/im/users/{uid}/presence", "GET /v1/im/users/{uid}", "PATCH /v1/im/users/me",
	"POST /v1/im/groups", "GET /v1/im/groups", "GET /v1/im/groups/{gid}", "DELETE /v1/im/groups/{gid}",
	"PUT /v1/im/groups/{gid}/profile", "PUT /v1/im/groups/{gid}/settings", "PUT /v1/im/groups/{gid}/announcement",
	"POST /v1/im/groups/{gid}/transfer", "POST /v1/im/groups/{gid}/invites", "POST /v1/im/groups/{gid}/invites/accept",
	"POST /v1/im/groups/{gid}/join", "POST /v1/im/groups/{gid}/join-requests",
	"POST /v1/im/groups/{gid}/join-requests/{uid}/approve", "POST /v1/im/groups/{gid}/join-requests/{uid}/reject",
	"POST /v1/im/groups/{gid}/leave", "GET /v1/im/groups/{gid}/members", "DELETE /v1/im/groups/{gid}/members/{uid}",
	"POST /v1/im/groups/{gid}/members/{uid}/unban", "PUT /v1/im/groups/{gid}/members/{uid}/role",
	"PUT /v1/im/groups/{gid}/members/{uid}/mute", "DELETE /v1/im/groups/{gid}/members/{uid}/mute",
	"GET /v1/im/friends", "POST /v1/im/friends/requests", "POST /v1/im/friends/requests/{uid}/accept",
	"POST /v1/im/friends/requests/{uid}/decline", "DELETE /v1/im/friends/{uid}",
	"GET /v1/im/blocks", "POST /v1/im/blocks", "DELETE /v1/im/blocks/{uid}",
	"GET /v1/im/conversations", "GET /v1/im/friends/requests",
	"POST /v1/im/action-tokens", "POST /v1/im/action-tokens/consume",
	"POST /v1/im/account/logout", "POST /v1/im/account/logout-everywhere", "GET /v1/im/account/sessions",
	"DELETE /v1/im/account/sessions/{session_id}", "PUT /v1/im/account/password", "PUT /v1/im/account/contact",
	"POST /v1/im/account/delete", "POST /v1/im/auth/password-reset/token", "POST /v1/im/auth/password-reset",
	"POST /v1/im/verify/codes", "POST /v1/im/verify/codes/status", "POST /v1/im/verify/codes/verify",
	"GET /v1/im/search/users", "GET /v1/im/search/groups", "GET /v1/im/users", "GET /v1/im/groups/requests",
}

// allOpts is a stack with every handler the route list covers.
var allOpts = stackOpts{reads: true, self: true}

func TestOpenAPIListsEveryRoute(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{Version: "v9"}, allOpts)
	resp, err := s.srv.Client().Get(s.srv.URL + "/openapi.json")
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
			Security      []map[string][]string `json:"security"`
			NoIdempotency bool                  `json:"x-no-idempotency-key"`
			Parameters    []struct {
				Name     string `json:"name"`
				In       string `json:"in"`
				Required bool   `json:"required"`
			} `json:"parameters"`
			Responses map[string]any `json:"responses"`
		} `json:"paths"`
		Components struct {
			SecuritySchemes map[string]any `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || doc.OpenAPI != "3.1.0" || doc.Info.Version != "v9" || doc.Components.SecuritySchemes["bearer"] == nil {
		t.Fatalf("status %d, openapi %q, version %q, schemes %v", resp.StatusCode, doc.OpenAPI, doc.Info.Version, doc.Components.SecuritySchemes)
	}
	var got []string
	for path, ops := range doc.Paths {
		for method, op := range ops {
			route := strings.ToUpper(method) + " " + path
			got = append(got, route)
			public := strings.HasPrefix(path, "/v1/im/auth/") || strings.HasPrefix(path, "/v1/im/verify/")
			if !public && (len(op.Security) == 0 || op.Security[0]["bearer"] == nil) {
				t.Errorf("%s: no bearer security", route)
			}
			if _, ok := op.Responses["400"]; !ok {
				t.Errorf("%s: 400 not documented", route)
			}
			if _, ok := op.Responses["401"]; !ok && !public {
				t.Errorf("%s: 401 not documented", route)
			}
			idem := false
			for _, p := range op.Parameters {
				idem = idem || (p.In == "header" && p.Name == rest.HeaderIdempotencyKey && p.Required)
			}
			if write := method != "get"; write && !public && !idem && !op.NoIdempotency {
				t.Errorf("%s: Idempotency-Key header not documented as required", route)
			}
			if op.NoIdempotency && idem {
				t.Errorf("%s: takes no Idempotency-Key, yet documents it as required", route)
			}
		}
	}
	sort.Strings(got)
	want := append([]string(nil), routes...)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("routes differ:\ngot  %v\nwant %v", got, want)
	}
}

// apiDoc is the part of the OpenAPI document the contract tests read.
type apiDoc struct {
	Paths map[string]map[string]struct {
		OperationID   string                `json:"operationId"`
		RequestBody   any                   `json:"requestBody"`
		Security      []map[string][]string `json:"security"`
		NoIdempotency bool                  `json:"x-no-idempotency-key"`
		Responses     map[string]struct {
			Reasons []string       `json:"x-reasons"`
			Open    bool           `json:"x-reasons-open"`
			Headers map[string]any `json:"headers"`
		} `json:"responses"`
	} `json:"paths"`
}

func (s *stack) apiDoc(t *testing.T) apiDoc {
	t.Helper()
	resp, err := s.srv.Client().Get(s.srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc apiDoc
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// catalogue is rest.Reasons by reason.
func catalogue() map[string]int {
	m := map[string]int{}
	for _, r := range rest.Reasons() {
		m[r.Reason] = r.Status
	}
	return m
}

// TestOpenAPIDocumentsTheServersAnswers checks the document against the one error mapping: every
// documented error status and reason is one the server answers with that status, the statuses
// the server answers are all there (400 not 422, login's 401, the duplicate send's 200, 413 on
// every write, 415 with every body, 429 where limited), and every reason the mapping produces is
// in the catalogue under the status it answers.
func TestOpenAPIDocumentsTheServersAnswers(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, allOpts)
	doc := s.apiDoc(t)
	cat := catalogue()
	for path, ops := range doc.Paths {
		for method, op := range ops {
			route := strings.ToUpper(method) + " " + path
			public := len(op.Security) == 0
			write := method != "get"
			for code, r := range op.Responses {
				status, err := strconv.Atoi(code)
				if err != nil {
					t.Errorf("%s: response %q is not a status", route, code)
					continue
				}
				if status < 400 {
					continue
				}
				if len(r.Reasons) == 0 {
					t.Errorf("%s: %d documents no reason", route, status)
				}
				for _, reason := range r.Reasons {
					if cat[reason] != status {
						t.Errorf("%s: %d documents reason %s, which the server answers with %d", route, status, reason, cat[reason])
					}
				}
			}
			want := map[string][]string{
				"400": {rest.ReasonInvalid}, "500": {rest.ReasonInternal}, "503": {rest.ReasonRetry},
			}
			if write {
				want["413"] = []string{rest.ReasonTooLarge}
			}
			if op.RequestBody != nil {
				want["415"] = []string{rest.ReasonUnsupportedMediaType}
			}
			if !public {
				want["401"] = []string{rest.ReasonUnauthenticated, rest.ReasonTokenExpired, rest.ReasonTokenInvalid, rest.ReasonTokenRevoked,
					rest.ReasonSessionRevoked}
				if write && !op.NoIdempotency {
					want["400"] = append(want["400"], rest.ReasonIdempotencyKeyRequired)
					want["409"] = []string{rest.ReasonConflict, rest.ReasonInProgress, rest.ReasonIdempotencyKeyReused}
				}
			}
			switch op.OperationID {
			case "login":
				want["401"] = []string{rest.ReasonInvalidCredentials, rest.ReasonAPIKeyInvalid}
				want["429"] = []string{rest.ReasonRateLimited}
			case "register":
				want["429"] = []string{rest.ReasonRateLimited}
				want["403"] = []string{"registration_closed"}
			case "send-message":
				if _, ok := op.Responses["200"]; !ok {
					t.Errorf("%s: the duplicate's 200 is not documented", route)
				}
				want["201"] = nil
			}
			if op.Responses["503"].Headers["Retry-After"] == nil {
				t.Errorf("%s: 503 does not document Retry-After", route)
			}
			if _, ok := op.Responses["422"]; ok {
				t.Errorf("%s: documents 422, which the server never answers (validation is 400)", route)
			}
			for code, reasons := range want {
				r, ok := op.Responses[code]
				if !ok {
					t.Errorf("%s: %s not documented", route, code)
					continue
				}
				for _, reason := range reasons {
					if !slices.Contains(r.Reasons, reason) {
						t.Errorf("%s: %s does not document reason %s (has %v)", route, code, reason, r.Reasons)
					}
				}
			}
		}
	}

	// The mapping's answers are in the catalogue under the status they are answered with.
	for _, err := range []error{domain.ErrInvalid, domain.ErrForbidden, domain.ErrNotFound, domain.ErrConcurrency,
		domain.ErrInProgress, domain.ErrRetryable, context.Canceled, errors.New("boom"),
		account.ErrInvalidCredentials, account.ErrInvalidAPIKey, account.ErrTokenRevoked, account.ErrSessionRevoked,
		auth.ErrTokenExpired, auth.ErrTokenInvalid} {
		e := rest.MapError(t.Context(), err)
		if cat[e.Reason] != e.GetStatus() {
			t.Errorf("MapError(%v) answers %d %s; the catalogue has %s at %d", err, e.GetStatus(), e.Reason, e.Reason, cat[e.Reason])
		}
	}
}

// TestEveryOperationRefusesBadInputAsDocumented walks every operation of the document with bad
// input: no credentials, no Idempotency-Key, a malformed body, a body of the wrong shape, a body
// of another media type and a body over the limit. Every answer must be the envelope with a
// status and reason the document lists for that operation.
func TestEveryOperationRefusesBadInputAsDocumented(t *testing.T) {
	t.Parallel()
	const maxBody = 2048
	s := newStack(t, rest.Config{MaxBodyBytes: maxBody}, allOpts)
	doc := s.apiDoc(t)
	tok := s.token(t, s.tenant, 7)
	params := strings.NewReplacer("{topic}", "grp1", "{seq}", "1", "{uid}", "8", "{gid}", "1", "{session_id}", "s1")
	big := `{"x":"` + strings.Repeat("a", maxBody) + `"}`
	n := 0
	for path, ops := range doc.Paths {
		for method, op := range ops {
			route := strings.ToUpper(method) + " " + path
			m := strings.ToUpper(method)
			url := params.Replace(path)
			public := len(op.Security) == 0
			write := m != http.MethodGet
			hasBody := op.RequestBody != nil
			documented := func(what string, a answer, wantStatus int, wantReason string) {
				t.Helper()
				n++
				r, ok := op.Responses[strconv.Itoa(a.Status)]
				if !ok {
					t.Errorf("%s %s: answered %d, which is not documented: %s", route, what, a.Status, a.Raw)
					return
				}
				if a.Status >= 400 && !r.Open && !slices.Contains(r.Reasons, a.Body.Reason) {
					t.Errorf("%s %s: answered %d %s, not among the documented %v", route, what, a.Status, a.Body.Reason, r.Reasons)
				}
				if wantStatus != 0 && (a.Status != wantStatus || a.Body.Reason != wantReason) {
					t.Errorf("%s %s: got %d %s, want %d %s", route, what, a.Status, a.Body.Reason, wantStatus, wantReason)
				}
			}
			bearer, key := tok, "walk-"+op.OperationID
			if public {
				bearer, key = "", ""
			}
			if !public {
				documented("without credentials", s.do(t, req{method: m, path: url, body: `{`, key: key}),
					http.StatusUnauthorized, rest.ReasonUnauthenticated)
			}
			if write && !public && !op.NoIdempotency {
				documented("without Idempotency-Key", s.do(t, req{method: m, path: url, body: `{`, token: bearer}),
					http.StatusBadRequest, rest.ReasonIdempotencyKeyRequired)
			}
			wantStatus, wantReason := 0, ""
			if hasBody {
				wantStatus, wantReason = http.StatusBadRequest, rest.ReasonInvalid
			}
			documented("with a malformed body", s.do(t, req{method: m, path: url, body: `{"a":`, token: bearer, key: key + "-1"}),
				wantStatus, wantReason)
			documented("with a body of the wrong shape", s.do(t, req{method: m, path: url, body: `{"no_such_field":[1]}`, token: bearer, key: key + "-2"}),
				wantStatus, wantReason)
			if hasBody {
				documented("with a text/plain body", s.do(t, req{method: m, path: url, body: `hello`, token: bearer, key: key + "-3",
					headers: map[string]string{"Content-Type": "text/plain"}}), http.StatusUnsupportedMediaType, rest.ReasonUnsupportedMediaType)
			}
			if write {
				documented("with a body over the limit", s.do(t, req{method: m, path: url, body: big, token: bearer, key: key + "-4"}),
					http.StatusRequestEntityTooLarge, rest.ReasonTooLarge)
			}
		}
	}
	if n < 4*len(routes) {
		t.Fatalf("only %d requests for %d routes", n, len(routes))
	}
}

// TestDocsPage checks the human-readable API page: served from the binary, listing every
// operation of the document, loading nothing from elsewhere.
func TestDocsPage(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{})
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := s.srv.Client().Get(s.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, page := get(rest.DocsPath)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET %s: %d %s", rest.DocsPath, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, ops := range s.apiDoc(t).Paths {
		for _, op := range ops {
			if !strings.Contains(page, `id="`+op.OperationID+`"`) {
				t.Errorf("the page lacks operation %s", op.OperationID)
			}
		}
	}
	for _, want := range []string{"invalid_credentials", "idempotency_key_required", `href="/docs/docs.css"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, banned := range []string{"<script", "http://", "https://", "//cdn"} {
		if strings.Contains(page, banned) {
			t.Errorf("the page contains %q: it must load nothing from elsewhere", banned)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	resp, css := get(rest.DocsPath + "/docs.css")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/css") || !strings.Contains(css, "body") {
		t.Fatalf("GET the stylesheet: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}
