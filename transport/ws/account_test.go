package ws_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/ws"
)

// memGate is an in-memory Gate: banned users and per-user not-before times.
type memGate struct {
	mu        sync.Mutex
	banned    map[domain.UserID]bool
	notBefore map[domain.UserID]time.Time
	limit     int
}

func newMemGate() *memGate {
	return &memGate{banned: map[domain.UserID]bool{}, notBefore: map[domain.UserID]time.Time{}}
}

func (g *memGate) Admit(_ context.Context, p auth.Principal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.banned[p.User] {
		return domain.Deny(domain.ReasonUserBanned)
	}
	if p.IssuedAt.Before(g.notBefore[p.User]) {
		return fmt.Errorf("issued too early: %w", account.ErrTokenRevoked)
	}
	return nil
}

func (g *memGate) MaxContentBytes(context.Context, domain.TenantID) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limit
}

func (g *memGate) ban(u domain.UserID) {
	g.mu.Lock()
	g.banned[u] = true
	g.mu.Unlock()
}

// endedWith waits for the session-level ctrl with reason and the close 1008 that follows.
func (cl *client) endedWith(reason string, within time.Duration) {
	cl.t.Helper()
	code, why := cl.closed(within)
	if code != websocket.StatusPolicyViolation || why != reason {
		cl.t.Fatalf("%s: closed with %d %q, want 1008 %q", cl.name, code, why, reason)
	}
	for _, f := range cl.snapshot() {
		if f.Ctrl != nil && f.Ctrl.ID == "" && f.Ctrl.Reason == reason {
			return
		}
	}
	cl.t.Fatalf("%s: no ctrl frame with reason %s before the close", cl.name, reason)
}

// TestAccountChangesEndSessionsOnEveryNode: a ban broadcast from one node closes the user's
// sessions on both nodes at once and no one else's; a revocation ends only the sessions whose
// token is older than it; the gate refuses logins and ends a session at its next frame when a
// notice was missed; a tenant broadcast reaches every session of the tenant as an info frame.
func TestAccountChangesEndSessionsOnEveryNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	gate := newMemGate()
	a, b := c.node(t, "a", nodeOpts{gate: gate}), c.node(t, "b", nodeOpts{gate: gate})
	u1a, u1b, u2 := dial(t, a, "u1@a", dialOpts{}), dial(t, b, "u1@b", dialOpts{}), dial(t, b, "u2@b", dialOpts{})
	u1a.login(c, 1)
	u1b.login(c, 1)
	u2.login(c, 2)

	gate.ban(1)
	start := time.Now()
	err := a.fan.Broadcast(testCtx(t), &fanout.Message{Kind: fanout.KindAccount, Tenant: acme,
		Account: &fanout.AccountControl{What: "banned", User: 1, Banned: true, EndSessions: true, Reason: ws.ReasonUserBanned}})
	if err != nil {
		t.Fatal(err)
	}
	u1a.endedWith(ws.ReasonUserBanned, time.Second)
	u1b.endedWith(ws.ReasonUserBanned, time.Second)
	t.Logf("both sessions closed %s after the ban", time.Since(start).Round(time.Millisecond))
	if r := u2.call("p", `{"ping":{"id":"p"}}`); r.Code != 200 {
		t.Fatalf("another user's session: %+v", r)
	}
	again := dial(t, b, "u1 again", dialOpts{})
	if r := again.call("login", map[string]any{"login": map[string]any{"id": "login", "token": c.token(t, 1)}}); r.Code != 403 || r.Reason != ws.ReasonUserBanned {
		t.Fatalf("banned login: %+v", r)
	}

	// Revocation: the old token's session ends, the new token's stays.
	old := dial(t, a, "u3 old", dialOpts{})
	old.login(c, 3)
	cut := time.Now()
	time.Sleep(5 * time.Millisecond)
	fresh := dial(t, b, "u3 fresh", dialOpts{})
	fresh.login(c, 3)
	gate.mu.Lock()
	gate.notBefore[3] = cut
	gate.mu.Unlock()
	if err := b.fan.Broadcast(testCtx(t), &fanout.Message{Kind: fanout.KindAccount, Tenant: acme,
		Account: &fanout.AccountControl{What: "tokens_revoked", User: 3, NotBefore: cut, EndSessions: true, EndBefore: cut,
			Reason: ws.ReasonTokenRevoked}}); err != nil {
		t.Fatal(err)
	}
	old.endedWith(ws.ReasonTokenRevoked, time.Second)
	if r := fresh.call("sub1", `{"sub":{"id":"sub1","topic":"grp5"}}`); r.Code != 200 {
		t.Fatalf("session with a token issued after the revocation: %+v", r)
	}

	// A missed notice: the gate ends the session at its next frame that needs a login.
	gate.ban(2)
	u2.write(`{"sub":{"id":"s2","topic":"grp5"}}`)
	u2.endedWith(ws.ReasonUserBanned, 5*time.Second)

	// A tenant broadcast reaches every logged-in session of the tenant, on both nodes.
	other := dial(t, a, "other tenant", dialOpts{})
	otherTok, _ := c.tokens.Issue(domain.MustTenantID("globex"), 9, time.Hour)
	if r := other.call("login", map[string]any{"login": map[string]any{"id": "login", "token": otherTok}}); r.Code != 200 {
		t.Fatal(r)
	}
	u4 := dial(t, a, "u4@a", dialOpts{})
	u4.login(c, 4)
	if err := b.fan.Broadcast(testCtx(t), &fanout.Message{Kind: fanout.KindAccount, Tenant: acme, TS: time.Now(),
		Content: []byte(`{"text":"maintenance at 22:00"}`), Account: &fanout.AccountControl{What: "broadcast"}}); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []*client{u4, fresh} {
		cl.waitFor("broadcast", func(fs []serverFrame) bool {
			for _, f := range fs {
				if f.Info != nil && f.Info.What == "broadcast" {
					return true
				}
			}
			return false
		})
	}
	time.Sleep(100 * time.Millisecond)
	for _, f := range other.snapshot() {
		if f.Info != nil {
			t.Fatalf("another tenant's session got %+v", f.Info)
		}
	}
}

// TestPubUsesTheTenantContentLimit: the gate's limit for the tenant, below the gateway's own,
// refuses a larger pub with 400 content too_large and writes nothing.
func TestPubUsesTheTenantContentLimit(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	gate := newMemGate()
	gate.limit = 20
	n := c.node(t, "a", nodeOpts{gate: gate})
	cl := dial(t, n, "u1", dialOpts{})
	cl.login(c, 1)
	before := c.events(t)
	r := cl.call("p1", map[string]any{"pub": map[string]any{"id": "p1", "topic": "grp1", "client_msg_id": "m1",
		"content": strings.Repeat("x", 30)}})
	if r.Code != 400 || r.Params["reason"] != "too_large" {
		t.Fatalf("large pub: %+v", r)
	}
	if c.events(t) != before {
		t.Fatal("a refused pub wrote an event")
	}
	if r := cl.call("p2", map[string]any{"pub": map[string]any{"id": "p2", "topic": "grp1", "client_msg_id": "m2", "content": "small"}}); r.Code != 202 {
		t.Fatalf("small pub: %+v", r)
	}
}

// banDuringAdmit is a memGate that, the first time it admits user, bans the user and delivers the
// ban's notice to hub before it answers: the ban lands between the check of a login and the
// session's registration as one of the user's sessions.
type banDuringAdmit struct {
	*memGate
	user domain.UserID
	hub  func() *ws.Hub
	once sync.Once
}

func (g *banDuringAdmit) Admit(ctx context.Context, p auth.Principal) error {
	if err := g.memGate.Admit(ctx, p); err != nil || p.User != g.user {
		return err
	}
	g.once.Do(func() {
		g.ban(g.user)
		g.hub().Deliver(&fanout.Message{Kind: fanout.KindAccount, Tenant: p.Tenant, Account: &fanout.AccountControl{
			What: "banned", User: g.user, Banned: true, EndSessions: true, Reason: ws.ReasonUserBanned}})
	})
	return nil
}

// TestALoginRacingABanDoesNotOutliveIt: a ban whose notice reaches the node while a login of the
// user is being decided either refuses the login or ends its session; the session never stays
// logged in, receiving what is pushed to it, until its client sends a frame.
func TestALoginRacingABanDoesNotOutliveIt(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	var a *node
	gate := &banDuringAdmit{memGate: newMemGate(), user: 1, hub: func() *ws.Hub { return a.gw.Hub() }}
	a = c.node(t, "a", nodeOpts{gate: gate})
	u := dial(t, a, "u1", dialOpts{})
	r := u.call("login", map[string]any{"login": map[string]any{"id": "login", "token": c.token(t, 1)}})
	if r.Code == 200 {
		u.endedWith(ws.ReasonUserBanned, time.Second)
		return
	}
	if r.Code != 403 || r.Reason != ws.ReasonUserBanned {
		t.Fatalf("login racing a ban: %+v, want 403 user_banned", r)
	}
	if r := u.call("sub", `{"sub":{"id":"sub","topic":"grp5"}}`); r.Code != 401 || r.Reason != ws.ReasonNotAuthenticated {
		t.Fatalf("sub after the refused login: %+v, want 401 not_authenticated", r)
	}
}
