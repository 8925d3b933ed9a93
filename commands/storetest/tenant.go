package storetest

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// ProvisionTenant records tenant in the tenant registry of the event store behind pool and store
// (see EventStore), as `imledger tenant create` does without the MySQL database, so the edges
// that check the registry serve it. It returns the registry.
func ProvisionTenant(t testing.TB, pool *pgxpool.Pool, store *eventstore.Store, tenantID domain.TenantID) *tenant.Registry {
	t.Helper()
	reg, err := tenant.New(tenant.Deps{Pool: pool, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Provision(testenv.Context(t), tenantID, nil, tenant.Meta{}); err != nil {
		t.Fatalf("provision tenant %s: %v", tenantID, err)
	}
	return reg
}
