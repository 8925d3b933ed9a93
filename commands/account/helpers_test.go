package account_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/account/passhash"
	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
)

// cheap keeps the tests fast; the default parameters are exercised by commands/account/passhash.
var cheap = passhash.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

var acme = domain.MustTenantID("acme")

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

type env struct {
	pool  *pgxpool.Pool
	store *eventstore.Store
	svc   *account.Service
}

// newEnv migrates a fresh database and returns a Service over it.
func newEnv(t *testing.T, deps account.Deps, cfg account.Config) *env {
	t.Helper()
	pool, store := storetest.EventStore(t, 0)
	deps.Pool, deps.Store = pool, store
	if cfg.Password == (passhash.Params{}) {
		cfg.Password = cheap
	}
	svc, err := account.New(deps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{pool: pool, store: store, svc: svc}
}

func (e *env) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(testCtx(t), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// fixedIDs hands out the ids in order, then counts up from the last.
type fixedIDs struct {
	ids  []domain.UserID
	next atomic.Int64
}

func (f *fixedIDs) NewUserID(context.Context) (domain.UserID, error) {
	i := f.next.Add(1) - 1
	if int(i) < len(f.ids) {
		return f.ids[i], nil
	}
	return f.ids[len(f.ids)-1] + domain.UserID(i) - domain.UserID(len(f.ids)-1), nil
}

// accountsOf makes users exist in tenant, as a registration does (governance acts only on a
// user of its tenant).
func (e *env) accountsOf(t *testing.T, tenant domain.TenantID, users ...domain.UserID) {
	t.Helper()
	storetest.RegisterUsers(t, e.store, tenant, users...)
}
