package rest_test

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

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
}

func TestOpenAPIListsEveryRoute(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{Version: "v9"}, stackOpts{reads: true})
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
			Security   []map[string][]string `json:"security"`
			Parameters []struct {
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
			public := strings.HasPrefix(path, "/v1/im/auth/")
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
			if write := method != "get"; write && !public && !idem {
				t.Errorf("%s: Idempotency-Key header not documented as required", route)
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
