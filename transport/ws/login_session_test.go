package ws_test

import (
	"context"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/account/passhash"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/access"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/ws"
)

// guardGate admits what a node's real account guard admits.
type guardGate struct{ g *account.Guard }

func (g guardGate) Admit(_ context.Context, p auth.Principal) error {
	return g.g.CheckSession(p.Tenant, p.User, p.IssuedAt, p.Session)
}

func (guardGate) MaxContentBytes(context.Context, domain.TenantID) int { return 0 }

// TestSignedOutSessionsEndOnEveryNode runs two gateways, each with its own account guard fed by
// the fanout through access.Deliverer, as serve wires them. A login session signed out on node a
// ends that session's connections on both nodes within a second, with session_revoked, and only
// those; node b refuses the session's token at once. A password change made from one session
// ends the user's other sessions and the connections of a token without a session, and keeps the
// changing session's.
func TestSignedOutSessionsEndOnEveryNode(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := newCluster(t)
	guards := map[string]*account.Guard{}
	nodes := map[string]*node{}
	for _, id := range []string{"a", "b"} {
		g, err := account.NewGuard(c.pool, account.GuardConfig{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		guards[id] = g
		nodes[id] = c.node(t, id, nodeOpts{gate: guardGate{g}, local: func(h *ws.Hub) fanout.Deliverer {
			return access.NewDeliverer(h, nil, g)
		}})
	}
	accounts, err := account.New(account.Deps{Pool: c.pool, Store: c.store},
		account.Config{Password: passhash.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := accounts.Register(ctx, account.Register{Tenant: acme, Login: "mei", Password: "correct horse"})
	if err != nil {
		t.Fatal(err)
	}
	uid := reg.User
	notifier := access.NewNotifier(nodes["a"].fan, nil)
	sessions, err := account.NewSessions(account.SessionDeps{Store: c.store, Guard: guards["a"], Notifier: notifier})
	if err != nil {
		t.Fatal(err)
	}
	gov, err := account.NewGovernance(account.GovernanceDeps{Pool: c.pool, Store: c.store, Accounts: accounts,
		Guard: guards["a"], Notifier: notifier})
	if err != nil {
		t.Fatal(err)
	}
	issued := time.Now().Add(-time.Second)
	tokenOf := func(session string) string {
		t.Helper()
		if session == "" {
			tok, err := c.tokens.IssueFrom(acme, uid, issued, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		if err := sessions.StartSession(ctx, account.StartSession{Tenant: acme, User: uid, SessionID: session,
			StartedAt: issued.Truncate(time.Millisecond), ExpiresAt: issued.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		tok, err := c.tokens.IssueSession(acme, uid, session, issued, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	login := func(n, name, tok string) *client {
		t.Helper()
		cl := dial(t, nodes[n], name, dialOpts{})
		if r := cl.call("login", map[string]any{"login": map[string]any{"id": "login", "token": tok}}); r.Code != 200 {
			t.Fatalf("%s: login = %+v", name, r)
		}
		return cl
	}
	phone, laptop, tablet, legacy := tokenOf("phone"), tokenOf("laptop"), tokenOf("tablet"), tokenOf("")
	phoneA, phoneB := login("a", "phone@a", phone), login("b", "phone@b", phone)
	laptopB, tabletA, legacyA := login("b", "laptop@b", laptop), login("a", "tablet@a", tablet), login("a", "legacy@a", legacy)

	start := time.Now()
	if _, err := sessions.EndSession(ctx, account.EndSession{Tenant: acme, User: uid, SessionID: "phone", By: "laptop"}); err != nil {
		t.Fatal(err)
	}
	phoneA.endedWith(ws.ReasonSessionRevoked, time.Second)
	phoneB.endedWith(ws.ReasonSessionRevoked, time.Second)
	t.Logf("the signed-out session's connections closed on both nodes %s after the sign-out", time.Since(start).Round(time.Millisecond))
	for _, cl := range []*client{laptopB, tabletA, legacyA} {
		if r := cl.call("p", `{"ping":{"id":"p"}}`); r.Code != 200 {
			t.Fatalf("%s after another session's sign-out: %+v", cl.name, r)
		}
	}
	again := dial(t, nodes["b"], "phone again@b", dialOpts{})
	if r := again.call("login", map[string]any{"login": map[string]any{"id": "login", "token": phone}}); r.Code != 401 || r.Reason != ws.ReasonSessionRevoked {
		t.Fatalf("the signed-out token on the other node: %+v", r)
	}

	// The laptop changes the password: the tablet and the token without a session end, the
	// laptop stays.
	if _, err := gov.ChangePassword(ctx, account.ChangePassword{Tenant: acme, User: uid, Old: "correct horse",
		New: "battery staple", Session: "laptop"}); err != nil {
		t.Fatal(err)
	}
	tabletA.endedWith(ws.ReasonTokenRevoked, time.Second)
	legacyA.endedWith(ws.ReasonTokenRevoked, time.Second)
	if r := laptopB.call("s", `{"sub":{"id":"s","topic":"grp5"}}`); r.Code != 200 {
		t.Fatalf("the changing session after the change: %+v", r)
	}
	if err := guards["b"].CheckSession(acme, uid, issued, "tablet"); err == nil {
		t.Fatal("node b's guard admits the tablet after the change")
	}
}
