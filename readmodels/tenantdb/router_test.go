package tenantdb_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// newRouter returns a Router whose databases are named <unique>_<tenant> and dropped at cleanup,
// so this test sees only its own tenants.
func newRouter(t *testing.T) *tenantdb.Router {
	t.Helper()
	testenv.MySQLServer(t)
	prefix := testenv.UniqueName("imt_td")
	testenv.DropMySQLDatabasesAtCleanup(t, prefix+"_")
	r, err := tenantdb.NewRouter(tenantdb.Config{
		ServerDSN:        testenv.MySQLDSN,
		DatabaseTemplate: prefix + "_" + tenantdb.TenantPlaceholder,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestProvisionIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newRouter(t)
	tenant := domain.MustTenantID("acme")

	if _, err := r.DB(ctx, tenant); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("DB before provisioning: %v, want ErrNotFound", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- r.Provision(ctx, tenant) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent provision: %v", err)
		}
	}
	if err := r.Provision(ctx, tenant); err != nil {
		t.Fatalf("provision again: %v", err)
	}
	db, err := r.DB(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.DB(ctx, tenant)
	if err != nil || again != db {
		t.Fatalf("second DB call returned another pool (%v)", err)
	}
	for _, table := range []string{"im_group_messages", "im_messages", "im_read_marks", "im_message_deletions", "im_groups", "im_users"} {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatalf("table %s: %v", table, err)
		}
	}
	var charset string
	if err := db.QueryRowContext(ctx, "SELECT @@character_set_database").Scan(&charset); err != nil {
		t.Fatal(err)
	}
	if charset != "utf8mb4" {
		t.Fatalf("database charset %q, want utf8mb4", charset)
	}
}

func TestTenantsListsProvisionedDatabases(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newRouter(t)
	for _, id := range []string{"t2", "t1", "t_3"} {
		if err := r.Provision(ctx, domain.MustTenantID(id)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r.Tenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range got {
		names = append(names, g.String())
	}
	if strings.Join(names, ",") != "t1,t2,t_3" {
		t.Fatalf("Tenants = %v, want [t1 t2 t_3]", names)
	}
}

func TestBadTenantIDsNeverReachSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRouter(t)
	var zero domain.TenantID
	if err := r.Provision(ctx, zero); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("Provision(zero tenant) = %v, want ErrInvalid", err)
	}
	if _, err := r.DB(ctx, zero); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("DB(zero tenant) = %v, want ErrInvalid", err)
	}
	for _, bad := range []string{"a`b", "x;drop database mysql", "Acme", "-x", "a b", strings.Repeat("a", 33)} {
		if _, err := domain.NewTenantID(bad); err == nil {
			t.Errorf("tenant id %q accepted", bad)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	cases := map[string]tenantdb.Config{
		"no placeholder":     {DatabaseTemplate: "im_t_"},
		"two placeholders":   {DatabaseTemplate: "{tenant}_{tenant}"},
		"backtick":           {DatabaseTemplate: "im`_{tenant}"},
		"dash":               {DatabaseTemplate: "im-{tenant}"},
		"too long":           {DatabaseTemplate: strings.Repeat("x", 33) + "{tenant}"},
		"dsn names database": {ServerDSN: "root@tcp(127.0.0.1:3306)/mysql"},
		"idle above open":    {MaxOpenConns: 4, MaxIdleConns: 5},
		"idle above limit":   {MaxOpenConns: 100, MaxIdleConns: tenantdb.MaxIdleConnsLimit + 1},
	}
	for name, cfg := range cases {
		if _, err := tenantdb.NewRouter(cfg); err == nil {
			t.Errorf("%s: NewRouter accepted %+v", name, cfg)
		}
	}
	r, err := tenantdb.NewRouter(tenantdb.Config{})
	if err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	defer r.Close()
	if got := r.DatabaseName(domain.MustTenantID("acme")); got != "im_t_acme" {
		t.Fatalf("DatabaseName = %q, want im_t_acme", got)
	}
}

func TestUnreachableServerIsRetryable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: "root@tcp(127.0.0.1:1)/"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tenant := domain.MustTenantID("acme")
	if _, err := r.DB(ctx, tenant); !errors.Is(err, domain.ErrRetryable) {
		t.Fatalf("DB on a closed port = %v, want ErrRetryable", err)
	}
	if err := r.Provision(ctx, tenant); !errors.Is(err, domain.ErrRetryable) {
		t.Fatalf("Provision on a closed port = %v, want ErrRetryable", err)
	}
}

// TestDroppedDatabaseIsNotProvisioned: once a tenant's database is dropped, both a connection
// opened before (ER_NO_SUCH_TABLE) and a new one (ER_BAD_DB_ERROR, or DB on a fresh router) fail
// with readmodels.ErrNotProvisioned, not as an unclassified error; provisioning it again heals
// the router's pool.
func TestDroppedDatabaseIsNotProvisioned(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newRouter(t)
	tenant := domain.MustTenantID("acme")
	if err := r.Provision(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	count := func(db *sql.DB) error {
		var n int
		return tenantdb.WrapErr("count", db.QueryRowContext(ctx, "SELECT COUNT(*) FROM im_messages").Scan(&n))
	}
	db, err := r.DB(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if err := count(db); err != nil {
		t.Fatal(err)
	}
	server, err := sql.Open("mysql", testenv.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if _, err := server.ExecContext(ctx, "DROP DATABASE `"+r.DatabaseName(tenant)+"`"); err != nil {
		t.Fatal(err)
	}
	if err := count(db); !errors.Is(err, readmodels.ErrNotProvisioned) || errors.Is(err, domain.ErrRetryable) {
		t.Fatalf("a connection opened before the drop: %v, want ErrNotProvisioned, not retryable", err)
	}
	db.SetMaxIdleConns(0) // the next query opens a new connection
	if err := count(db); !errors.Is(err, readmodels.ErrNotProvisioned) {
		t.Fatalf("a connection opened after the drop: %v, want ErrNotProvisioned", err)
	}
	fresh := newRouter(t)
	if _, err := fresh.DB(ctx, domain.MustTenantID("nobody")); !errors.Is(err, readmodels.ErrNotProvisioned) || !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("DB of a missing database: %v, want ErrNotProvisioned and ErrNotFound", err)
	}
	if err := r.Provision(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	if err := count(db); err != nil {
		t.Fatalf("after provisioning again: %v", err)
	}
}
