package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/access"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/rest"
)

// TestTheGateRefusesWhatTheRegistryAndGovernanceSay runs the API with the real gate over the
// tenant registry and account governance of its own database.
func TestTheGateRefusesWhatTheRegistryAndGovernanceSay(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var gate struct {
		cache *tenant.Cache
		guard *account.Guard
		*access.Gate
	}
	s := newStack(t, rest.Config{}, stackOpts{gateFor: func(s *stack) rest.Gate {
		reg, _ := tenant.New(tenant.Deps{Pool: s.pool, Store: s.store})
		gate.cache, _ = tenant.NewCache(reg, tenant.CacheConfig{MissTTL: time.Nanosecond}, nil)
		gate.guard, _ = account.NewGuard(s.pool, account.GuardConfig{}, nil)
		gate.Gate, _ = access.NewGate(gate.cache, gate.guard, 0)
		return gate.Gate
	}})
	creds := fmt.Sprintf(`{"tenant":%q,"login":"wile","password":"correct horse"}`, s.tenant)
	expect(t, "register into an unknown tenant", s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/register", body: creds}),
		http.StatusForbidden, "tenant_not_found")
	expect(t, "login into an unknown tenant", s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login", body: creds}),
		http.StatusForbidden, "tenant_not_found")
	expect(t, "a token of an unknown tenant", s.do(t, req{method: http.MethodGet, path: "/v1/im/users/me/presence",
		token: s.token(t, s.tenant, 5)}), http.StatusForbidden, "tenant_not_found")

	reg := storetest.ProvisionTenant(t, s.pool, s.store, s.tenant)
	expect(t, "register", s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/register", body: creds}), http.StatusCreated, "ok")
	login := s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login", body: creds})
	expect(t, "login", login, http.StatusOK, "ok")
	token := login.data(t)["token"].(string)
	uid, err := domain.ParseUserID(login.data(t)["user_id"].(string))
	if err != nil {
		t.Fatal(err)
	}

	// The tenant's content limit applies to sends.
	res, err := reg.SetConfig(ctx, s.tenant, map[string]json.RawMessage{"max_content_bytes": json.RawMessage(`16`),
		"registration_open": json.RawMessage(`false`)}, tenant.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	gate.cache.Apply(res.Info)
	big := s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", token: token, key: "k1",
		body: `{"client_msg_id":"m1","content":"` + strings.Repeat("x", 20) + `"}`})
	if big.Status != http.StatusBadRequest || big.Body.Details["reason"] != "too_large" {
		t.Fatalf("20 bytes over the tenant's 16: %d %s", big.Status, big.Raw)
	}
	expect(t, "register with registration closed", s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/register",
		body: strings.Replace(creds, "wile", "coyote", 1)}), http.StatusForbidden, "registration_closed")

	// A ban refuses the login and the token; a revocation the token only.
	gov, _ := account.NewGovernance(account.GovernanceDeps{Pool: s.pool, Store: s.store, Accounts: s.accounts, Guard: gate.guard})
	if _, err := gov.Ban(ctx, s.tenant, uid, "", account.Meta{}); err != nil {
		t.Fatal(err)
	}
	expect(t, "banned login", s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login", body: creds}), http.StatusForbidden, "user_banned")
	expect(t, "banned token", s.do(t, req{method: http.MethodGet, path: "/v1/im/users/me/presence", token: token}), http.StatusForbidden, "user_banned")
	if _, err := gov.Unban(ctx, s.tenant, uid, "", account.Meta{}); err != nil {
		t.Fatal(err)
	}
	expect(t, "a token from before the ban", s.do(t, req{method: http.MethodGet, path: "/v1/im/users/me/presence", token: token}),
		http.StatusUnauthorized, "token_revoked")

	// A suspension refuses everything of the tenant.
	sus, err := reg.Suspend(ctx, s.tenant, "", tenant.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	gate.cache.Apply(sus.Info)
	expect(t, "login into a suspended tenant", s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login", body: creds}),
		http.StatusForbidden, "tenant_suspended")
}

// TestEditKeepsTheTenantContentLimit: an edit's content is held to the tenant's limit as a
// send's is, so a message refused as too large cannot be written by editing a small one.
func TestEditKeepsTheTenantContentLimit(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var cache *tenant.Cache
	s := newStack(t, rest.Config{}, stackOpts{gateFor: func(s *stack) rest.Gate {
		reg, _ := tenant.New(tenant.Deps{Pool: s.pool, Store: s.store})
		cache, _ = tenant.NewCache(reg, tenant.CacheConfig{MissTTL: time.Nanosecond}, nil)
		guard, _ := account.NewGuard(s.pool, account.GuardConfig{}, nil)
		gate, _ := access.NewGate(cache, guard, 0)
		return gate
	}})
	reg := storetest.ProvisionTenant(t, s.pool, s.store, s.tenant)
	res, err := reg.SetConfig(ctx, s.tenant, map[string]json.RawMessage{"max_content_bytes": json.RawMessage(`16`)}, tenant.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	cache.Apply(res.Info)
	token := s.token(t, s.tenant, 5)
	sent := s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", token: token, key: "k1",
		body: `{"client_msg_id":"m1","content":"short"}`})
	expect(t, "send within the limit", sent, http.StatusCreated, "ok")
	big := `{"version":"1","content":"` + strings.Repeat("x", 20) + `"}`
	edit := s.do(t, req{method: http.MethodPatch, path: "/v1/im/topics/grp1/messages/1", token: token, key: "k2", body: big})
	if edit.Status != http.StatusBadRequest || edit.Body.Details["field"] != "content" || edit.Body.Details["reason"] != "too_large" {
		t.Fatalf("edit to 20 bytes over the tenant's 16: %d %s", edit.Status, edit.Raw)
	}
	topic, _ := domain.GroupTopic(1)
	if n := s.count(t, "SELECT count(*) FROM events WHERE stream_id = $1", domain.MessageOpsStreamID(topic, 1)); n != 0 {
		t.Fatalf("the refused edit wrote %d events", n)
	}
	ok := s.do(t, req{method: http.MethodPatch, path: "/v1/im/topics/grp1/messages/1", token: token, key: "k3",
		body: `{"version":"1","content":"fixed"}`})
	expect(t, "edit within the limit", ok, http.StatusOK, "ok")
}

// resetDuringLogin is the real gate; the first login it admits (IssuedAt zero) has its user's
// password reset right then, after the login read and checked the old password.
type resetDuringLogin struct {
	rest.Gate
	once  sync.Once
	reset func(domain.UserID)
}

func (g *resetDuringLogin) Admit(ctx context.Context, p auth.Principal) error {
	err := g.Gate.Admit(ctx, p)
	if err == nil && p.IssuedAt.IsZero() {
		g.once.Do(func() { g.reset(p.User) })
	}
	return err
}

// TestALoginRacingAPasswordResetGetsNoLiveToken: a password reset revokes the tokens of every
// login that checked the old password, also one whose check was under way when the reset
// landed (argon2id takes a while): such a login gets no token that works.
func TestALoginRacingAPasswordResetGetsNoLiveToken(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	gate := &resetDuringLogin{}
	s := newStack(t, rest.Config{}, stackOpts{gateFor: func(s *stack) rest.Gate {
		reg, _ := tenant.New(tenant.Deps{Pool: s.pool, Store: s.store})
		cache, _ := tenant.NewCache(reg, tenant.CacheConfig{MissTTL: time.Nanosecond}, nil)
		guard, _ := account.NewGuard(s.pool, account.GuardConfig{}, nil)
		gov, _ := account.NewGovernance(account.GovernanceDeps{Pool: s.pool, Store: s.store, Accounts: s.accounts, Guard: guard})
		gate.Gate, _ = access.NewGate(cache, guard, 0)
		gate.reset = func(u domain.UserID) {
			if _, err := gov.ResetPassword(ctx, s.tenant, u, "a new password", account.Meta{}); err != nil {
				t.Error(err)
			}
		}
		return gate
	}})
	storetest.ProvisionTenant(t, s.pool, s.store, s.tenant)
	creds := fmt.Sprintf(`{"tenant":%q,"login":"wile","password":"the old password"}`, s.tenant)
	expect(t, "register", s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/register", body: creds}), http.StatusCreated, "ok")
	login := s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login", body: creds})
	if login.Status == http.StatusOK {
		expect(t, "the token of a login with the password just reset", s.do(t, req{method: http.MethodGet,
			path: "/v1/im/users/me/presence", token: login.data(t)["token"].(string)}), http.StatusUnauthorized, "token_revoked")
	} else {
		expect(t, "a login with the password just reset", login, http.StatusUnauthorized, rest.ReasonInvalidCredentials)
	}
	expect(t, "the old password after the reset", s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login", body: creds}),
		http.StatusUnauthorized, rest.ReasonInvalidCredentials)
	fresh := s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login", body: strings.Replace(creds, "the old password", "a new password", 1)})
	expect(t, "the new password", fresh, http.StatusOK, "ok")
	expect(t, "the new password's token", s.do(t, req{method: http.MethodGet, path: "/v1/im/users/me/presence",
		token: fresh.data(t)["token"].(string)}), http.StatusOK, "ok")
}
