package searchbench_test

import (
	"context"
	"testing"
	"time"

	"github.com/imledger/imledger/cmd/imledger/bench/searchbench"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// TestSeedAndRun seeds a small tenant, seeds it again (nothing to add), and runs searches of
// both kinds: every query is timed and the prefixes, taken from real users, find users.
func TestSeedAndRun(t *testing.T) {
	t.Parallel()
	testenv.MySQLServer(t)
	prefix := testenv.UniqueName("sb")
	r, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN, DatabaseTemplate: prefix + "_" + tenantdb.TenantPlaceholder})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	testenv.DropMySQLDatabasesAtCleanup(t, prefix)
	tenant := domain.MustTenantID("bench")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Provision(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	store, err := business.NewStore(r, nil, business.Config{})
	if err != nil {
		t.Fatal(err)
	}
	o := searchbench.Options{Store: store, Tenant: tenant, Users: 450, Batch: 100, Workers: 2, Queries: 50}
	if n, err := searchbench.Seed(ctx, o); err != nil || n != 450 {
		t.Fatalf("seed: %d %v", n, err)
	}
	if n, err := searchbench.Seed(ctx, o); err != nil || n != 0 {
		t.Fatalf("seed again: %d %v, want nothing to add", n, err)
	}
	hits, _, err := store.SearchUsers(ctx, tenant, business.UserSearch{Searcher: 1, By: business.SearchByLogin, Prefix: searchbench.Login(7)})
	if err != nil || len(hits) != 1 || hits[0].Nickname != searchbench.Nickname(7) {
		t.Fatalf("user 7 by its login: %+v %v", hits, err)
	}
	results, err := searchbench.Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 {
		t.Fatalf("results %+v", results)
	}
	for _, res := range results {
		if res.Queries != 50 || res.Hits == 0 || res.P50 <= 0 || res.P99 < res.P50 || res.Max < res.P99 {
			t.Errorf("%+v", res)
		}
	}
}
