package tenant_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// failingDatabases fails to provision until healed.
type failingDatabases struct {
	mu      sync.Mutex
	healed  bool
	created []domain.TenantID
}

func (f *failingDatabases) Provision(_ context.Context, t domain.TenantID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.healed {
		return errors.New("mysql: connection refused")
	}
	f.created = append(f.created, t)
	return nil
}

type notes struct {
	mu    sync.Mutex
	infos []tenant.Info
}

func (n *notes) TenantChanged(_ context.Context, i tenant.Info) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.infos = append(n.infos, i)
}

func denied(err error, reason string) bool {
	var d *domain.DeniedError
	return errors.As(err, &d) && d.Reason == reason
}

func TestRegistryLifecycle(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool, store := storetest.EventStore(t, 0)
	dbs := &failingDatabases{}
	n := &notes{}
	reg, err := tenant.New(tenant.Deps{Pool: pool, Store: store, Databases: dbs, Notifier: n})
	if err != nil {
		t.Fatal(err)
	}
	acme := domain.MustTenantID("acme")
	meta := tenant.Meta{Actor: domain.Actor{Type: domain.ActorAdmin, ID: "ops"}, CausationID: "c1"}

	// A database that cannot be created leaves no tenant behind.
	if _, err := reg.Provision(ctx, acme, nil, meta); err == nil {
		t.Fatal("provision succeeded without a database")
	}
	if _, err := reg.Get(ctx, acme); !denied(err, domain.ReasonTenantNotFound) {
		t.Fatalf("after a failed provision: %v", err)
	}
	dbs.healed = true
	res, err := reg.Provision(ctx, acme, map[string]json.RawMessage{"max_content_bytes": json.RawMessage(`100`)}, meta)
	if err != nil || res.Unchanged || res.Info.Status != domain.TenantStatusActive || res.Info.Settings.ContentLimit(65536) != 100 {
		t.Fatalf("provision: %+v %v", res, err)
	}
	if res, err := reg.Provision(ctx, acme, nil, meta); err != nil || !res.Unchanged {
		t.Fatalf("provision again: %+v %v", res, err)
	}
	if res, err := reg.Suspend(ctx, acme, "unpaid", meta); err != nil || res.Info.Status != domain.TenantStatusSuspended || res.Info.NotBefore.IsZero() {
		t.Fatalf("suspend: %+v %v", res, err)
	}
	got, err := reg.Get(ctx, acme)
	if err != nil || got.Check() == nil || got.Version != 2 {
		t.Fatalf("get after suspend: %+v %v", got, err)
	}
	if _, err := reg.Resume(ctx, acme, meta); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.SetConfig(ctx, acme, map[string]json.RawMessage{"colour": json.RawMessage(`1`)}, meta); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("unknown setting: %v", err)
	}
	if _, err := reg.SetConfig(ctx, acme, map[string]json.RawMessage{"registration_open": json.RawMessage(`false`)}, meta); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Suspend(ctx, domain.MustTenantID("nosuch"), "", meta); !denied(err, domain.ReasonTenantNotFound) {
		t.Fatalf("suspend an unknown tenant: %v", err)
	}
	list, err := reg.List(ctx)
	if err != nil || len(list) != 1 || list[0].Settings.Registration() || list[0].Version != 4 {
		t.Fatalf("list: %+v %v", list, err)
	}
	// The row mirrors the stream, event by event.
	evs, err := store.ReadStream(ctx, acme, domain.TenantStreamID, 0, 0)
	if err != nil || len(evs) != 4 || evs[0].EventType != domain.EventTenantProvisioned || evs[0].CausationID != "c1" || evs[1].Actor.ID != "ops" {
		t.Fatalf("stream: %d events %v", len(evs), err)
	}
	if len(n.infos) != 4 || n.infos[1].Status != domain.TenantStatusSuspended {
		t.Fatalf("notified %d changes", len(n.infos))
	}
}

func TestCacheAnswersFromMemoryAndRemembersMisses(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool, store := storetest.EventStore(t, 0)
	reg, _ := tenant.New(tenant.Deps{Pool: pool, Store: store})
	cache, err := tenant.NewCache(reg, tenant.CacheConfig{MissTTL: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	acme, late := domain.MustTenantID("acme"), domain.MustTenantID("late")
	if _, err := reg.Provision(ctx, acme, nil, tenant.Meta{}); err != nil {
		t.Fatal(err)
	}
	if err := cache.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cache.Check(ctx, late); !denied(err, domain.ReasonTenantNotFound) {
		t.Fatalf("unknown tenant: %v", err)
	}
	if _, err := reg.Provision(ctx, late, nil, tenant.Meta{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cache.Check(ctx, late); !denied(err, domain.ReasonTenantNotFound) {
		t.Fatalf("a remembered miss is answered from memory within MissTTL: %v", err)
	}
	if err := cache.Reload(ctx, late); err != nil {
		t.Fatal(err)
	}
	if _, err := cache.Check(ctx, late); err != nil {
		t.Fatalf("after Reload: %v", err)
	}
	res, err := reg.Suspend(ctx, acme, "", tenant.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cache.Check(ctx, acme); err != nil {
		t.Fatalf("the cache still holds the active tenant until told: %v", err)
	}
	cache.Apply(res.Info)
	if _, err := cache.Check(ctx, acme); !denied(err, domain.ReasonTenantSuspended) {
		t.Fatalf("after Apply: %v", err)
	}
	older := res.Info
	older.Version, older.Status = 1, domain.TenantStatusActive
	cache.Apply(older)
	if _, err := cache.Check(ctx, acme); !denied(err, domain.ReasonTenantSuspended) {
		t.Fatalf("an older version must not replace a newer one: %v", err)
	}
	// Without the registry, known tenants are still answered.
	pool.Close()
	if _, err := cache.Lookup(ctx, late); err != nil {
		t.Fatalf("cached tenant with the registry down: %v", err)
	}
}
