package account_test

import (
	"bytes"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/migrations"
)

// TestAPIKeysAreEvents: creating and revoking keys records tenant.api_key_created.v1 and
// tenant.api_key_revoked.v1 with the key's id and SHA-256 and never the key; the table is their
// read model: a verification matches the log, names the key whose row was altered by hand, and a
// rebuild restores it, after which the keys verify as before.
func TestAPIKeysAreEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, account.Deps{}, account.Config{APIKeyCacheTTL: -1})
	ctx := testCtx(t)
	var keys []string
	for range 3 {
		k, err := e.svc.CreateAPIKey(ctx, acme)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if _, err := e.svc.CreateAPIKey(ctx, domain.MustTenantID("other")); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.RevokeAPIKey(ctx, keys[0]); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.RevokeAPIKeyID(ctx, acme, account.APIKeyID(keys[1])); err != nil {
		t.Fatal(err)
	}
	events, err := e.store.ReadAll(ctx, domain.EventFilter{Tenant: acme}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range events {
		types = append(types, string(ev.EventType))
		for _, k := range keys {
			if bytes.Contains(ev.Payload, []byte(k)) || strings.Contains(ev.StreamID, k) {
				t.Fatalf("event %s holds a key", ev.EventType)
			}
		}
	}
	if want := "tenant.api_key_created.v1 tenant.api_key_created.v1 tenant.api_key_created.v1 tenant.api_key_revoked.v1 tenant.api_key_revoked.v1"; strings.Join(types, " ") != want {
		t.Fatalf("acme's events %v, want %s", types, want)
	}
	var created domain.TenantAPIKeyCreated
	if err := events[2].Decode(&created); err != nil || created.KeyID != account.APIKeyID(keys[2]) ||
		events[2].StreamID != domain.APIKeyStreamID(created.KeySHA256) {
		t.Fatalf("created event %+v on %s (%v)", created, events[2].StreamID, err)
	}

	rb, err := account.NewAPIKeyRebuilder(e.pool, e.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	verify := func() (account.APIKeyVerifyResult, string) {
		t.Helper()
		res, err := rb.Verify(ctx, acme)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		res.Report(&out)
		return res, out.String()
	}
	if res, out := verify(); !res.OK() || res.Keys != 3 || res.Events != 5 {
		t.Fatalf("verify of the live keys: %+v\n%s", res, out)
	}
	// A revoked key brought back by hand is a difference naming it, and a rebuild undoes it.
	if _, err := e.pool.Exec(ctx, "UPDATE tenant_api_keys SET revoked_at = NULL WHERE tenant_id = 'acme'"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.VerifyAPIKey(ctx, keys[0]); err != nil {
		t.Fatalf("the key brought back by hand: %v", err)
	}
	res, out := verify()
	if res.OK() || len(res.Diffs) != 2 || !strings.Contains(out, "key "+account.APIKeyID(keys[0])) || strings.Contains(out, keys[0]) {
		t.Fatalf("verify after two keys were brought back by hand: %+v\n%s", res, out)
	}
	if n, err := rb.Rebuild(ctx, acme); err != nil || n != 5 {
		t.Fatalf("rebuild: %d events, %v", n, err)
	}
	if res, out := verify(); !res.OK() {
		t.Fatalf("verify after the rebuild: %+v\n%s", res, out)
	}
	for i, k := range keys {
		_, err := e.svc.VerifyAPIKey(ctx, k)
		if valid := err == nil; valid != (i == 2) {
			t.Errorf("key %d after the rebuild: %v", i, err)
		}
	}
	if _, err := e.svc.VerifyAPIKey(ctx, keys[0]); !errors.Is(err, account.ErrInvalidAPIKey) {
		t.Errorf("a revoked key after the rebuild: %v", err)
	}
}

// Of concurrent revocations of one key exactly one records an event; the others are refused as
// for a revoked key.
func TestConcurrentRevocationsRecordOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t, account.Deps{}, account.Config{APIKeyCacheTTL: -1})
	ctx := testCtx(t)
	key, err := e.svc.CreateAPIKey(ctx, acme)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		oks  int
		errs []error
	)
	for range 6 {
		wg.Go(func() {
			err := e.svc.RevokeAPIKey(ctx, key)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				oks++
			case !errors.Is(err, account.ErrInvalidAPIKey):
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if oks != 1 || len(errs) > 0 {
		t.Fatalf("%d revocations succeeded (errors %v), want 1", oks, errs)
	}
	if n := e.count(t, "SELECT count(*) FROM events WHERE event_type = 'tenant.api_key_revoked.v1'"); n != 1 {
		t.Fatalf("%d revocation events, want 1", n)
	}
}

// The keys created before they were events are recorded as events by the migration that made
// them events, so a rebuild from the log keeps every one of them (the revoked one revoked).
func TestKeysOlderThanTheLogAreRecorded(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url := testenv.Postgres(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Postgres(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO tenant_api_keys (key_hash, tenant_id, created_at, revoked_at) VALUES
		(sha256('imk_old_valid'), 'acme', now() - interval '2 days', NULL),
		(sha256('imk_old_revoked'), 'acme', now() - interval '3 days', now() - interval '1 day')`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.UpPostgres(ctx, db); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store, err := eventstore.New(pool, eventstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := account.NewAPIKeyRebuilder(pool, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := rb.Verify(ctx, acme); err != nil || !res.OK() || res.Keys != 2 || res.Events != 3 {
		t.Fatalf("verify of the keys older than the log: %+v %v", res, err)
	}
	if n, err := rb.Rebuild(ctx, acme); err != nil || n != 3 {
		t.Fatalf("rebuild: %d %v", n, err)
	}
	var valid, revoked int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE revoked_at IS NULL), count(*) FILTER (WHERE revoked_at IS NOT NULL)
		FROM tenant_api_keys WHERE tenant_id = 'acme'`).Scan(&valid, &revoked); err != nil || valid != 1 || revoked != 1 {
		t.Fatalf("after the rebuild %d valid and %d revoked keys (%v), want one each", valid, revoked, err)
	}
}
