package rest_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/rest"
)

// profileOf folds user's profile stream from the event store: the state patches must merge into.
func (s *stack) profileOf(t testing.TB, user domain.UserID) (domain.UserProfile, int) {
	t.Helper()
	evs, err := s.store.ReadStream(testCtx(t), s.tenant, domain.ProfileStreamID(user), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	st, err := domain.FoldProfile(s.tenant, user, evs)
	if err != nil {
		t.Fatal(err)
	}
	return st.Profile(), len(evs)
}

func wantProfile(t testing.TB, what string, got domain.UserProfile, nickname, avatar, signature string) {
	t.Helper()
	if got.Nickname() != nickname || got.Avatar() != avatar || got.Signature() != signature {
		t.Fatalf("%s: profile {%q %q %q}, want {%q %q %q}", what, got.Nickname(), got.Avatar(), got.Signature(),
			nickname, avatar, signature)
	}
}

// Patches sent one after the other, faster than the read model follows, each keep what the
// others set, and a patch that changes nothing writes nothing.
func TestUpdateProfilePatchesMergeTheEventSourcedProfile(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true})
	const user = domain.UserID(78)
	tok := s.token(t, s.tenant, user)
	patch := func(key, body string, unchanged bool) {
		t.Helper()
		a := s.do(t, req{method: http.MethodPatch, path: "/v1/im/users/me", token: tok, key: key, body: body})
		expect(t, "patch "+body, a, http.StatusOK, "ok")
		if a.data(t)["unchanged"] != unchanged {
			t.Fatalf("patch %s: %s, want unchanged %v", body, a.Raw, unchanged)
		}
	}
	patch("p0", `{"nickname":"zero","avatar":"https://a/0.png","signature":"s0"}`, false)
	s.project(t) // the read model holds the first profile and is not projected again until the end

	patch("p1", `{"nickname":"one"}`, false)
	patch("p2", `{"avatar":"https://a/x.png"}`, false)
	patch("p3", `{"signature":"sig"}`, false)
	patch("p4", `{}`, true)
	patch("p5", `{"nickname":"one","signature":"sig"}`, true)
	got, events := s.profileOf(t, user)
	wantProfile(t, "event-sourced profile", got, "one", "https://a/x.png", "sig")
	if events != 4 {
		t.Fatalf("profile stream has %d events, want 4: one per patch that changed something", events)
	}

	s.project(t)
	a := s.do(t, req{method: http.MethodGet, path: "/v1/im/users/me", token: tok})
	if d := a.data(t); d["nickname"] != "one" || d["avatar"] != "https://a/x.png" || d["signature"] != "sig" {
		t.Fatalf("profile read after the patches: %s", a.Raw)
	}
	expect(t, "a bad avatar", s.do(t, req{method: http.MethodPatch, path: "/v1/im/users/me", token: tok, key: "p6",
		body: `{"avatar":"not a url"}`}), http.StatusBadRequest, rest.ReasonInvalid)
}

// Concurrent patches of different fields never lose each other's change: each is merged into the
// stream version it is appended against.
func TestUpdateProfileConcurrentPatchesKeepEachOther(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true})
	const user = domain.UserID(79)
	tok := s.token(t, s.tenant, user)
	expect(t, "first profile", s.do(t, req{method: http.MethodPatch, path: "/v1/im/users/me", token: tok, key: "p0",
		body: `{"nickname":"zero","avatar":"https://a/0.png","signature":"s0"}`}), http.StatusOK, "ok")
	s.project(t)
	for round := 1; round <= 5; round++ {
		bodies := []string{
			fmt.Sprintf(`{"nickname":"nick %d"}`, round),
			fmt.Sprintf(`{"avatar":"https://a/%d.png"}`, round),
			fmt.Sprintf(`{"signature":"sig %d"}`, round),
		}
		answers := make([]answer, len(bodies))
		var wg sync.WaitGroup
		for i, body := range bodies {
			wg.Go(func() {
				answers[i] = s.do(t, req{method: http.MethodPatch, path: "/v1/im/users/me", token: tok,
					key: fmt.Sprintf("r%d-%d", round, i), body: body})
			})
		}
		wg.Wait()
		for i, a := range answers {
			expect(t, "concurrent patch "+bodies[i], a, http.StatusOK, "ok")
		}
		got, _ := s.profileOf(t, user)
		wantProfile(t, fmt.Sprintf("round %d", round), got, fmt.Sprintf("nick %d", round),
			fmt.Sprintf("https://a/%d.png", round), fmt.Sprintf("sig %d", round))
	}
}

// TestAvatarMustBeAnHTTPURL: a user's or a group's avatar that is not an absolute http(s) URL
// (javascript:, data:, a relative path) is 400 invalid avatar/bad_format and writes nothing.
func TestAvatarMustBeAnHTTPURL(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true})
	const user = domain.UserID(80)
	tok := s.token(t, s.tenant, user)
	events := func() int { return s.count(t, `SELECT count(*) FROM events WHERE tenant_id = $1`, s.tenant.String()) }
	before := events()
	for i, avatar := range []string{"javascript:alert(1)", "JAVASCRIPT:alert(1)", "data:image/png;base64,AAAA", "/a.png", "//cdn.example/a.png"} {
		for _, r := range []req{
			{method: http.MethodPatch, path: "/v1/im/users/me", body: fmt.Sprintf(`{"nickname":"n","avatar":%q}`, avatar)},
			{method: http.MethodPost, path: "/v1/im/groups", body: fmt.Sprintf(`{"name":"g","avatar":%q}`, avatar)},
		} {
			r.token, r.key = tok, fmt.Sprintf("%s-%d", r.method, i)
			a := s.do(t, r)
			expect(t, r.method+" "+r.path+" avatar "+avatar, a, http.StatusBadRequest, rest.ReasonInvalid)
			if a.Body.Details["field"] != "avatar" || a.Body.Details["reason"] != "bad_format" {
				t.Errorf("%s %s avatar %s: details %v, want avatar/bad_format", r.method, r.path, avatar, a.Body.Details)
			}
		}
	}
	if n := events(); n != before {
		t.Fatalf("the refused avatars wrote %d events", n-before)
	}
	expect(t, "an https avatar", s.do(t, req{method: http.MethodPatch, path: "/v1/im/users/me", token: tok, key: "ok",
		body: `{"nickname":"n","avatar":"https://cdn.example/a.png"}`}), http.StatusOK, "ok")
}
