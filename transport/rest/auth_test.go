package rest_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/rest"
)

const sendBody = `{"client_msg_id":"c-1","content":"hello"}`

func TestAuthenticationIsRequired(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{})
	acme, other := s.tenant, domain.MustTenantID("other")
	good := s.token(t, acme, 7)
	expired, err := newSigner(t, func() time.Time { return time.Now().Add(-2 * time.Hour) }).Issue(acme, 7, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	forged := good[:len(good)-4] + "AAAA"
	otherKey, err := s.accounts.CreateAPIKey(testCtx(t), other)
	if err != nil {
		t.Fatal(err)
	}
	acmeKey, err := s.accounts.CreateAPIKey(testCtx(t), acme)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		token   string
		headers map[string]string
		reason  string
	}{
		{"no token", "", nil, rest.ReasonUnauthenticated},
		{"development headers without DevAuth", "", map[string]string{rest.HeaderTenant: acme.String(), rest.HeaderUser: "7"}, rest.ReasonUnauthenticated},
		{"not a bearer token", "", map[string]string{"Authorization": "Basic YWxpY2U6cHc="}, rest.ReasonTokenInvalid},
		{"garbage", "not.a.token", nil, rest.ReasonTokenInvalid},
		{"forged signature", forged, nil, rest.ReasonTokenInvalid},
		{"expired", expired, nil, rest.ReasonTokenExpired},
		{"token of another tenant than named", good, map[string]string{rest.HeaderTenant: "other"}, rest.ReasonTokenInvalid},
		{"API key of another tenant", good, map[string]string{rest.HeaderAPIKey: otherKey}, rest.ReasonTokenInvalid},
		{"unknown API key", good, map[string]string{rest.HeaderAPIKey: "imk_" + otherKey[4:len(otherKey)-2] + "xx"}, rest.ReasonAPIKeyInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range []req{
				{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", body: sendBody, key: "k-" + c.name},
				{method: http.MethodGet, path: "/v1/im/users/7/presence"},
			} {
				r.token, r.headers = c.token, c.headers
				a := s.do(t, r)
				expect(t, r.method+" "+r.path, a, http.StatusUnauthorized, c.reason)
				if a.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("401 without WWW-Authenticate: %v", a.Header)
				}
			}
		})
	}
	// The two keys' creations are the only events.
	if n := s.count(t, "SELECT count(*) FROM events WHERE event_type <> 'tenant.api_key_created.v1'"); n != 0 {
		t.Fatalf("refused requests wrote %d events", n)
	}
	if n := s.count(t, "SELECT count(*) FROM http_idempotency"); n != 0 {
		t.Fatalf("refused requests claimed %d idempotency keys", n)
	}
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", body: sendBody, key: "ok", token: good,
		headers: map[string]string{rest.HeaderAPIKey: acmeKey, rest.HeaderTenant: acme.String()}})
	expect(t, "token with its own tenant's API key", a, http.StatusCreated, "ok")
}

func TestRequiredAPIKey(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{RequireAPIKey: true}, stackOpts{})
	key, err := s.accounts.CreateAPIKey(testCtx(t), s.tenant)
	if err != nil {
		t.Fatal(err)
	}
	tok := s.token(t, s.tenant, 7)
	a := s.do(t, req{method: http.MethodGet, path: "/v1/im/users/me/presence", token: tok})
	expect(t, "no API key", a, http.StatusUnauthorized, rest.ReasonUnauthenticated)
	if a.Body.Details["header"] != rest.HeaderAPIKey {
		t.Errorf("details %v", a.Body.Details)
	}
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/users/me/presence", token: tok, headers: map[string]string{rest.HeaderAPIKey: key}})
	expect(t, "with the API key", a, http.StatusOK, "ok")

	reg := `{"login":"keyed","password":"password1"}`
	a = s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/register", body: reg})
	expect(t, "register without a key", a, http.StatusUnauthorized, rest.ReasonUnauthenticated)
	a = s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/register", body: reg, headers: map[string]string{rest.HeaderAPIKey: key}})
	expect(t, "register with the key names the tenant", a, http.StatusCreated, "ok")
	a = s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login", body: `{"tenant":"other","login":"keyed","password":"password1"}`,
		headers: map[string]string{rest.HeaderAPIKey: key}})
	expect(t, "login naming another tenant than the key's", a, http.StatusUnauthorized, rest.ReasonAPIKeyInvalid)
	a = s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login", body: `{"login":"keyed","password":"password1"}`,
		headers: map[string]string{rest.HeaderAPIKey: key}})
	expect(t, "login with the key", a, http.StatusOK, "ok")
}

func TestDevAuth(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{DevAuth: true}, stackOpts{})
	dev := map[string]string{rest.HeaderTenant: s.tenant.String(), rest.HeaderUser: "usr7"}
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", body: sendBody, key: "k1", headers: dev})
	expect(t, "development headers under DevAuth", a, http.StatusCreated, "ok")
	a = s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", body: sendBody, key: "k2",
		headers: map[string]string{rest.HeaderTenant: "Bad!", rest.HeaderUser: "7"}})
	expect(t, "bad tenant header", a, http.StatusUnauthorized, rest.ReasonUnauthenticated)
	if a.Body.Details["header"] != rest.HeaderTenant || a.Body.Details["reason"] != "bad_format" {
		t.Errorf("details %v", a.Body.Details)
	}
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/users/7/presence", token: "garbage", headers: dev})
	expect(t, "a bearer token wins over the development headers", a, http.StatusUnauthorized, rest.ReasonTokenInvalid)
}

func TestRegisterAndLogin(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{})
	body := `{"tenant":"` + s.tenant.String() + `","login":"Alice","password":"correct horse","nickname":"Alice A"}`
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/register", body: body})
	expect(t, "register", a, http.StatusCreated, "ok")
	uid := a.data(t)["user_id"].(string)
	if a.data(t)["login"] != "alice" || uid == "" {
		t.Fatalf("registered %s", a.Raw)
	}
	expect(t, "register again", s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/register", body: body}), http.StatusForbidden, "login_taken")
	a = s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/register", body: `{"tenant":"` + s.tenant.String() + `","login":"b","password":"correct horse"}`})
	expect(t, "short login", a, http.StatusBadRequest, rest.ReasonInvalid)
	if a.Body.Details["field"] != "login" || a.Body.Details["reason"] != "too_short" {
		t.Errorf("details %v", a.Body.Details)
	}

	login := func(name, password string) answer {
		return s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login",
			body: `{"tenant":"` + s.tenant.String() + `","login":"` + name + `","password":"` + password + `"}`})
	}
	a = login("alice", "correct horse")
	expect(t, "login", a, http.StatusOK, "ok")
	d := a.data(t)
	exp, err := time.Parse(time.RFC3339Nano, d["expires_at"].(string))
	if d["user_id"] != uid || d["token"] == "" || err != nil || time.Until(exp) < 23*time.Hour {
		t.Fatalf("login answer %s", a.Raw)
	}
	p, err := s.signer.Verify(d["token"].(string))
	if err != nil || p.Tenant != s.tenant || p.User.String() != uid {
		t.Fatalf("issued token: %+v %v", p, err)
	}
	wrong, unknown := login("alice", "wrong horse"), login("nobody", "correct horse")
	expect(t, "wrong password", wrong, http.StatusUnauthorized, rest.ReasonInvalidCredentials)
	expect(t, "unknown login", unknown, http.StatusUnauthorized, rest.ReasonInvalidCredentials)
	if wrong.Body.Message != unknown.Body.Message || wrong.Body.Details != nil || unknown.Body.Details != nil {
		t.Errorf("a wrong password and an unknown login answer differently: %s / %s", wrong.Raw, unknown.Raw)
	}
}

func TestLoginRateLimit(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{LoginPerName: 3}, stackOpts{})
	body := `{"tenant":"` + s.tenant.String() + `","login":"mallory","password":"guess"}`
	for i := range 3 {
		expect(t, "attempt", s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login", body: body}), http.StatusUnauthorized, rest.ReasonInvalidCredentials)
		_ = i
	}
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login", body: body})
	expect(t, "over the limit", a, http.StatusTooManyRequests, rest.ReasonRateLimited)
	if a.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	other := `{"tenant":"` + s.tenant.String() + `","login":"someone","password":"guess"}`
	expect(t, "another login name", s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login", body: other}), http.StatusUnauthorized, rest.ReasonInvalidCredentials)
}
