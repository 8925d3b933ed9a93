package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/actiontoken"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/commands/verify"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/login"
	"github.com/imledger/imledger/readmodels/tokendb"
	"github.com/imledger/imledger/transport/access"
	"github.com/imledger/imledger/transport/rest"
)

// selfParts are the collaborators of the account self-service a stack runs with.
type selfParts struct {
	guard  *account.Guard
	logins *login.Store
	codes  *codeGateway
	erased *erasures
}

// codeGateway is a real HTTP SMS and e-mail gateway that keeps the last code sent to each
// target for each scene.
type codeGateway struct {
	mu   sync.Mutex
	last map[string]string // scene + " " + to -> code
}

func (g *codeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var d struct {
		Scene, To, Code string
	}
	if err := json.NewDecoder(r.Body).Decode(&d); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	g.last[d.Scene+" "+d.To] = d.Code
	g.mu.Unlock()
}

// code returns the last code sent for scene to to.
func (g *codeGateway) code(t testing.TB, scene, to string) string {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.last[scene+" "+to]
	if !ok {
		t.Fatalf("no %s code was sent to %s", scene, to)
	}
	return c
}

// erasures records the accounts the delete endpoint asked to erase. The erasure itself is the
// crypto-shredding's (commands/account on its branch); the REST test checks what leads to it.
type erasures struct {
	mu    sync.Mutex
	users []domain.UserID
}

func (e *erasures) EraseAccount(_ context.Context, _ domain.TenantID, user domain.UserID) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.users = append(e.users, user)
	return nil
}

func (e *erasures) all() []domain.UserID {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]domain.UserID(nil), e.users...)
}

// withSelf adds the self-service over the stack's stores, as serve wires it: the guard and the
// gate over the tenant registry (where the tenant is provisioned), governance, sessions, codes
// through a real gateway, the session list, and action tokens when more did not add them. It
// needs withReads first.
func (s *stack) withSelf(t testing.TB, h *rest.Handlers, o stackOpts) {
	t.Helper()
	ctx := testCtx(t)
	p := &selfParts{logins: login.New(s.router), codes: &codeGateway{last: map[string]string{}}, erased: &erasures{}}
	s.self = p
	gw := httptest.NewServer(p.codes)
	t.Cleanup(gw.Close)
	sender, err := verify.NewHTTPSender(verify.HTTPSenderConfig{URL: gw.URL})
	if err != nil {
		t.Fatal(err)
	}
	codes, err := verify.New(verify.Config{HashKey: []byte("a test key of 32 bytes, not secret"), KeyPrefix: s.prefix + "vc:",
		TTL: o.codeTTL, ResendInterval: time.Millisecond, CreatePerHour: 100}, s.rdb, s.router, sender)
	if err != nil {
		t.Fatal(err)
	}
	reg := storetest.ProvisionTenant(t, s.pool, s.store, s.tenant)
	cache, err := tenant.NewCache(reg, tenant.CacheConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.guard, err = account.NewGuard(s.pool, account.GuardConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	gate, err := access.NewGate(cache, p.guard, 0)
	if err != nil {
		t.Fatal(err)
	}
	gov, err := account.NewGovernance(account.GovernanceDeps{Pool: s.pool, Store: s.store, Accounts: s.accounts, Guard: p.guard})
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := account.NewSessions(account.SessionDeps{Store: s.store, Guard: p.guard})
	if err != nil {
		t.Fatal(err)
	}
	self, err := account.NewSelfService(s.accounts, gov, sessions)
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if h.ActionTokens == nil {
		if h.ActionTokens, err = actiontoken.New(actiontoken.Config{KeyPrefix: s.prefix + "at:"},
			actiontoken.Deps{Redis: s.rdb, Events: s.store, Rows: tokendb.New(s.router)}); err != nil {
			t.Fatal(err)
		}
	}
	h.Self, h.SessionList, h.Eraser, h.Codes, h.Gate = self, p.logins, p.erased, codes, gate
}

// login logs in as name with password from ip (a loopback address) with device, and returns the
// answer.
func (s *stack) loginAs(t *testing.T, name, password, device string) answer {
	t.Helper()
	body := fmt.Sprintf(`{"tenant":%q,"login":%q,"password":%q,"device":%q}`, s.tenant, name, password, device)
	return s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login", body: body,
		headers: map[string]string{"User-Agent": "imledger-test/1.0 (\t" + strings.ReplaceAll(device, "\n", "") + ")"}})
}

// session is a logged-in login session: its token and id.
type session struct {
	token, id, user string
}

// signIn logs in as name and fails the test on anything but 200 with a session.
func (s *stack) signIn(t *testing.T, name, password, device string) session {
	t.Helper()
	a := s.loginAs(t, name, password, device)
	expect(t, "login "+name+" on "+device, a, http.StatusOK, "ok")
	d := a.data(t)
	x := session{token: d["token"].(string), user: d["user_id"].(string)}
	x.id, _ = d["session_id"].(string)
	if x.id == "" {
		t.Fatalf("login without a session: %s", a.Raw)
	}
	return x
}

// sendCode asks for a code of scene to phone and returns it, as the gateway received it.
func (s *stack) sendCode(t *testing.T, scene, phone string) string {
	t.Helper()
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/verify/codes",
		body: fmt.Sprintf(`{"tenant":%q,"scene":%q,"phone":%q}`, s.tenant, scene, phone)})
	expect(t, "send a "+scene+" code", a, http.StatusCreated, "ok")
	return s.self.codes.code(t, scene, strings.ReplaceAll(phone, " ", ""))
}

// events counts the tenant's events of type typ ("" for all).
func (s *stack) events(t *testing.T, typ string) int {
	t.Helper()
	if typ == "" {
		return s.count(t, "SELECT count(*) FROM events")
	}
	return s.count(t, fmt.Sprintf("SELECT count(*) FROM events WHERE event_type = '%s'", typ))
}
