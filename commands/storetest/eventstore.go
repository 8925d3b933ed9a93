package storetest

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver for migrations

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/migrations"
)

// EventStore migrates a fresh PostgreSQL database (see Postgres) and returns a pool over it with
// maxConns connections and an event store on that pool; maxConns 0 keeps pgx's default (the
// greater of 4 and the CPU count). Tests that race writers size the pool themselves, so they
// know how many can wait on a connection. The pool is closed at cleanup.
func EventStore(t testing.TB, maxConns int32) (*pgxpool.Pool, *eventstore.Store) {
	t.Helper()
	ctx := testenv.Context(t)
	url := testenv.Postgres(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := migrations.UpPostgres(ctx, db); err != nil {
		t.Fatal(err)
	}
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if maxConns > 0 {
		pcfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store, err := eventstore.New(pool, eventstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return pool, store
}

// DeadlockTimeout sets deadlock_timeout of pool's database to d for the sessions opened from now
// on, and returns a function that opens a new pool of such sessions (closed at cleanup), one per
// node or consumer. Tests that show two writers never deadlock use a long d: a deadlock would
// then show as a wait of d, not PostgreSQL's default 1 s.
func DeadlockTimeout(t testing.TB, pool *pgxpool.Pool, d time.Duration) func() *pgxpool.Pool {
	t.Helper()
	ctx := testenv.Context(t)
	set := fmt.Sprintf(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %%I SET deadlock_timeout = %%L', current_database(), '%dms'); END $$`, d.Milliseconds())
	if _, err := pool.Exec(ctx, set); err != nil {
		t.Fatal(err)
	}
	return func() *pgxpool.Pool {
		t.Helper()
		p, err := pgxpool.New(ctx, pool.Config().ConnString())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
}

// RegisterUsers makes users exist in tenant, as a registration does: each gets user.registered.v1
// (login "user<id>") on its profile stream. Commands that name another user (friend requests,
// blocks, invitations, 1:1 sends) refuse users that do not exist. A user who exists already is
// left as it is.
func RegisterUsers(t testing.TB, store *eventstore.Store, tenant domain.TenantID, users ...domain.UserID) {
	t.Helper()
	ctx := testenv.Context(t)
	for _, u := range users {
		if v, err := store.LastVersion(ctx, tenant, domain.ProfileStreamID(u)); err != nil {
			t.Fatal(err)
		} else if v > 0 {
			continue
		}
		login, err := domain.NewLogin("user" + u.String())
		if err != nil {
			t.Fatal(err)
		}
		pending, err := domain.Register(tenant, u, login, domain.UserProfile{}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		envs, err := domain.NewEnvelopes(tenant, domain.Actor{Type: domain.ActorSystem, ID: "test"}, pending)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.AppendStreams(ctx, tenant, []eventstore.StreamAppend{{StreamID: domain.ProfileStreamID(u), Events: envs}}); err != nil {
			t.Fatal(err)
		}
	}
}
