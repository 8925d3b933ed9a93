package access_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/account/passhash"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/access"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/fanout"
)

func denied(err error, reason string) bool {
	var d *domain.DeniedError
	return errors.As(err, &d) && d.Reason == reason
}

// loopback delivers broadcasts to the Deliverers of the nodes it knows, as the fanout would.
type loopback struct {
	mu    sync.Mutex
	nodes []fanout.Deliverer
	sent  []*fanout.Message
}

func (l *loopback) Broadcast(_ context.Context, m *fanout.Message) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent = append(l.sent, m)
	for _, n := range l.nodes {
		n.Deliver(m)
	}
	return nil
}

type sink struct{ got []*fanout.Message }

func (s *sink) Deliver(m *fanout.Message) { s.got = append(s.got, m) }

// TestGateAndNotifierAcrossNodes: a change committed on node 1 reaches node 2's gate through the
// notifier and node 2's deliverer, before node 2's sessions hear of it.
func TestGateAndNotifierAcrossNodes(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool, store := storetest.EventStore(t, 0)
	bus := &loopback{}
	notifier := access.NewNotifier(bus, nil)
	reg, _ := tenant.New(tenant.Deps{Pool: pool, Store: store, Notifier: notifier})
	accounts, _ := account.New(account.Deps{Pool: pool, Store: store},
		account.Config{Password: passhash.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}})
	type nodeParts struct {
		cache *tenant.Cache
		guard *account.Guard
		gate  *access.Gate
		hub   *sink
	}
	var nodes []nodeParts
	for range 2 {
		cache, _ := tenant.NewCache(reg, tenant.CacheConfig{}, nil)
		guard, _ := account.NewGuard(pool, account.GuardConfig{}, nil)
		gate, err := access.NewGate(cache, guard, 1000)
		if err != nil {
			t.Fatal(err)
		}
		hub := &sink{}
		bus.nodes = append(bus.nodes, access.NewDeliverer(hub, cache, guard))
		nodes = append(nodes, nodeParts{cache, guard, gate, hub})
	}
	gov, _ := account.NewGovernance(account.GovernanceDeps{Pool: pool, Store: store, Accounts: accounts,
		Guard: nodes[0].guard, Notifier: notifier})
	acme := domain.MustTenantID("acme")
	if err := nodes[1].gate.CheckTenant(ctx, acme); !denied(err, domain.ReasonTenantNotFound) {
		t.Fatalf("unknown tenant: %v", err)
	}
	if _, err := reg.Provision(ctx, acme, nil, tenant.Meta{}); err != nil {
		t.Fatal(err)
	}
	g2 := nodes[1].gate
	if err := g2.CheckTenant(ctx, acme); err != nil {
		t.Fatalf("provisioned tenant on the other node: %v", err)
	}
	if n := g2.MaxContentBytes(ctx, acme); n != 1000 {
		t.Fatalf("default limit is the node's: %d", n)
	}
	if _, err := reg.SetConfig(ctx, acme, map[string]json.RawMessage{"max_content_bytes": json.RawMessage(`10`),
		"registration_open": json.RawMessage(`false`)}, tenant.Meta{}); err != nil {
		t.Fatal(err)
	}
	if n := g2.MaxContentBytes(ctx, acme); n != 10 {
		t.Fatalf("limit after config_set on the other node: %d", n)
	}
	if err := g2.CanRegister(ctx, acme); !denied(err, domain.ReasonRegistrationClosed) {
		t.Fatalf("registration closed: %v", err)
	}

	storetest.RegisterUsers(t, store, acme, 42) // governance acts only on a user of its tenant
	issued := time.Now()
	p := auth.Principal{Tenant: acme, User: 42, IssuedAt: issued}
	if err := g2.Admit(ctx, p); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	if _, err := gov.RevokeTokens(ctx, acme, 42, "", account.Meta{}); err != nil {
		t.Fatal(err)
	}
	if err := g2.Admit(ctx, p); !errors.Is(err, account.ErrTokenRevoked) {
		t.Fatalf("revoked token on the other node: %v", err)
	}
	if err := g2.Admit(ctx, auth.Principal{Tenant: acme, User: 42, IssuedAt: time.Now()}); err != nil {
		t.Fatalf("a new token: %v", err)
	}
	last := nodes[1].hub.got[len(nodes[1].hub.got)-1]
	if last.Account.What != "tokens_revoked" || !last.Account.EndSessions || last.Account.EndBefore.IsZero() || last.Account.Reason != "token_revoked" {
		t.Fatalf("the gateway was told %+v", last.Account)
	}
	if _, err := gov.Ban(ctx, acme, 42, "", account.Meta{}); err != nil {
		t.Fatal(err)
	}
	if err := g2.Admit(ctx, auth.Principal{Tenant: acme, User: 42}); !denied(err, domain.ReasonUserBanned) {
		t.Fatalf("banned user's login: %v", err)
	}
	if _, err := reg.Suspend(ctx, acme, "", tenant.Meta{}); err != nil {
		t.Fatal(err)
	}
	if err := g2.Admit(ctx, auth.Principal{Tenant: acme, User: 7, IssuedAt: time.Now()}); !denied(err, domain.ReasonTenantSuspended) {
		t.Fatalf("suspended tenant: %v", err)
	}
	if _, err := reg.Resume(ctx, acme, tenant.Meta{}); err != nil {
		t.Fatal(err)
	}
	if err := g2.Admit(ctx, auth.Principal{Tenant: acme, User: 7, IssuedAt: issued}); !errors.Is(err, account.ErrTokenRevoked) {
		t.Fatalf("a token from before the suspension after the resume: %v", err)
	}
	if err := g2.Admit(ctx, auth.Principal{Tenant: acme, User: 7, IssuedAt: time.Now()}); err != nil {
		t.Fatalf("a new token after the resume: %v", err)
	}
}
