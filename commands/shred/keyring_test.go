package shred_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/commands/shred"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

func localKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func newKeyring(t *testing.T, pool *pgxpool.Pool, key string, ttl time.Duration) *shred.Keyring {
	t.Helper()
	url, err := shred.LocalKeeperURL(key)
	if err != nil {
		t.Fatal(err)
	}
	keepers, err := shred.NewURLKeepers(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = keepers.Close() })
	r, err := shred.New(pool, keepers, shred.Config{CacheTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func tenant(t *testing.T) domain.TenantID {
	t.Helper()
	id, err := domain.NewTenantID("shred")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func open(ctx context.Context, t *testing.T, r domain.Opener, tn domain.TenantID, tok string) ([]byte, error) {
	t.Helper()
	s, ok := domain.ParseSealed(tok)
	if !ok {
		t.Fatalf("not a sealed value: %q", tok)
	}
	return r.Open(ctx, tn, s)
}

func TestSealOpenOneKeyPerAuthorAndMonth(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool, _ := storetest.EventStore(t, 0)
	r := newKeyring(t, pool, localKey(t), time.Minute)
	tn := tenant(t)
	march := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)
	var toks []string
	for i, at := range []time.Time{march, march.Add(24 * time.Hour), march.AddDate(0, 1, 0)} {
		tok, err := r.Seal(ctx, tn, 42, at, domain.SealContent, []byte(`"secret words"`))
		if err != nil {
			t.Fatalf("seal %d: %v", i, err)
		}
		if strings.Contains(tok, "secret") {
			t.Fatalf("plaintext in token %q", tok)
		}
		toks = append(toks, tok)
	}
	if toks[0] == toks[1] {
		t.Fatal("two seals of the same value gave the same token: nonces are not fresh")
	}
	for _, tok := range toks {
		plain, err := open(ctx, t, r, tn, tok)
		if err != nil || string(plain) != `"secret words"` {
			t.Fatalf("open %q: %q, %v", tok, plain, err)
		}
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM data_keys WHERE user_id = 42`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Fatalf("%d data keys for two months of one author, want 2", rows)
	}
	// A value moved to another tenant does not open: the tenant is authenticated.
	other, _ := domain.NewTenantID("other")
	if _, err := open(ctx, t, r, other, toks[0]); !errors.Is(err, domain.ErrKeyErased) {
		t.Fatalf("open in another tenant: %v, want ErrKeyErased (no such key there)", err)
	}
	// A tampered value does not authenticate.
	s, _ := domain.ParseSealed(toks[0])
	s.Ciphertext[0] ^= 1
	if _, err := r.Open(ctx, tn, s); !errors.Is(err, domain.ErrSealBroken) {
		t.Fatalf("open of a tampered value: %v, want ErrSealBroken", err)
	}
}

func TestMissingKeyReadsErasedAndWrongKeeperKeyFails(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool, _ := storetest.EventStore(t, 0)
	r := newKeyring(t, pool, localKey(t), time.Minute)
	tn := tenant(t)
	tok, err := r.Seal(ctx, tn, 7, time.Now(), domain.SealText, []byte(`"Alice"`))
	if err != nil {
		t.Fatal(err)
	}
	// A key that was never made (another author's token) is erased, and reads as "".
	forged := strings.Replace(tok, ":7:", ":8:", 1)
	if _, err := open(ctx, t, r, tn, forged); !errors.Is(err, domain.ErrKeyErased) {
		t.Fatalf("missing key: %v, want ErrKeyErased", err)
	}
	payload := []byte(`{"nickname":"` + forged + `"}`)
	got, err := domain.OpenPayload(ctx, tn, payload, r)
	if err != nil || string(got) != `{"nickname":""}` {
		t.Fatalf("payload with a missing key: %s, %v", got, err)
	}
	// Another keeper key cannot unwrap the stored key: an error, never "erased".
	wrong := newKeyring(t, pool, localKey(t), time.Minute)
	_, err = open(ctx, t, wrong, tn, tok)
	if err == nil || errors.Is(err, domain.ErrKeyErased) || errors.Is(err, domain.ErrSealBroken) {
		t.Fatalf("open under the wrong keeper key: %v, want an unwrap error", err)
	}
	if _, err := domain.OpenPayload(ctx, tn, []byte(`{"nickname":"`+tok+`"}`), wrong); err == nil {
		t.Fatal("a payload opened under the wrong keeper key did not fail")
	}
}

func TestDestroyReachesOtherNodesWithinCacheTTL(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool, _ := storetest.EventStore(t, 0)
	key := localKey(t)
	const ttl = 300 * time.Millisecond
	a, b := newKeyring(t, pool, key, ttl), newKeyring(t, pool, key, ttl)
	tn := tenant(t)
	tok, err := a.Seal(ctx, tn, 5, time.Now(), domain.SealContent, []byte(`{"t":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := a.Seal(ctx, tn, 6, time.Now(), domain.SealContent, []byte(`"other user"`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open(ctx, t, b, tn, tok); err != nil { // b caches the key
		t.Fatal(err)
	}
	destroyedAt := time.Now()
	n, err := a.DestroyUser(ctx, tn, 5)
	if err != nil || n != 1 {
		t.Fatalf("destroy: %d keys, %v", n, err)
	}
	if _, err := open(ctx, t, a, tn, tok); !errors.Is(err, domain.ErrKeyErased) {
		t.Fatalf("the destroying node opened a destroyed key: %v", err)
	}
	// b may serve its cached copy until its entry expires, never longer.
	deadline := destroyedAt.Add(ttl + 100*time.Millisecond)
	for {
		_, err := open(ctx, t, b, tn, tok)
		if errors.Is(err, domain.ErrKeyErased) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("another node still opens a destroyed key %v after the destroy (cache TTL %v)", time.Since(destroyedAt), ttl)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A node told of the erasure forgets at once, whatever its cache TTL.
	c := newKeyring(t, pool, key, time.Hour)
	tok8, err := a.Seal(ctx, tn, 8, time.Now(), domain.SealText, []byte(`"x"`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open(ctx, t, c, tn, tok8); err != nil { // cached for an hour
		t.Fatal(err)
	}
	if _, err := a.DestroyUser(ctx, tn, 8); err != nil {
		t.Fatal(err)
	}
	c.Forget(tn, 8)
	if _, err := open(ctx, t, c, tn, tok8); !errors.Is(err, domain.ErrKeyErased) {
		t.Fatalf("a node that forgot the user after the destroy: %v, want ErrKeyErased at once", err)
	}
	if _, err := a.Seal(ctx, tn, 5, time.Now().AddDate(0, 2, 0), domain.SealContent, []byte(`"new"`)); !errors.Is(err, domain.ErrKeyErased) {
		t.Fatalf("seal for an erased user in a new month: %v, want ErrKeyErased", err)
	}
	if plain, err := open(ctx, t, b, tn, kept); err != nil || string(plain) != `"other user"` {
		t.Fatalf("another user's key after the erasure: %q, %v", plain, err)
	}
}

// TestOpeningAMissingKeyDoesNotBlockItsCreation: a value naming a key that was never made reads
// as erased, and the key can still be made by the author's next seal.
func TestOpeningAMissingKeyDoesNotBlockItsCreation(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool, _ := storetest.EventStore(t, 0)
	r := newKeyring(t, pool, localKey(t), time.Minute)
	tn := tenant(t)
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	forged := domain.Sealed{Kind: domain.SealText, Key: domain.DataKeyRef{User: 9, Month: domain.KeyMonth(at)},
		Nonce: make([]byte, 12), Ciphertext: []byte("not a ciphertext")}
	if _, err := r.Open(ctx, tn, forged); !errors.Is(err, domain.ErrKeyErased) {
		t.Fatalf("open under a key never made: %v, want ErrKeyErased", err)
	}
	tok, err := r.Seal(ctx, tn, 9, at, domain.SealText, []byte(`"Bob"`))
	if err != nil {
		t.Fatalf("seal after a miss of the same key: %v", err)
	}
	if plain, err := open(ctx, t, r, tn, tok); err != nil || string(plain) != `"Bob"` {
		t.Fatalf("open: %q, %v", plain, err)
	}
}

// TestDestroyBeforeErasesOnlyExpiredMonths: retention destroys a tenant's keys of the months
// before its horizon, of every author; the months it keeps, another tenant's keys and a user's
// erasure marker stay as they were.
func TestDestroyBeforeErasesOnlyExpiredMonths(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool, _ := storetest.EventStore(t, 0)
	r := newKeyring(t, pool, localKey(t), time.Minute)
	tn, other := tenant(t), domain.MustTenantID("kept")
	seal := func(tn domain.TenantID, user domain.UserID, at time.Time) string {
		tok, err := r.Seal(ctx, tn, user, at, domain.SealContent, []byte(`"words"`))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	sept, oct, nov := time.Date(2026, 9, 3, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 30, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	old1, old2, kept, otherOld := seal(tn, 1, sept), seal(tn, 2, oct), seal(tn, 1, nov), seal(other, 1, sept)
	if err := r.DestroyBefore(ctx, tn.String(), "2026-11"); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{old1, old2} {
		if _, err := open(ctx, t, r, tn, tok); !errors.Is(err, domain.ErrKeyErased) {
			t.Errorf("a key before the horizon still opens: %v", err)
		}
	}
	if b, err := open(ctx, t, r, tn, kept); err != nil || string(b) != `"words"` {
		t.Errorf("the horizon's month: %s, %v", b, err)
	}
	if b, err := open(ctx, t, r, other, otherOld); err != nil || string(b) != `"words"` {
		t.Errorf("another tenant's old month: %s, %v", b, err)
	}
	if err := r.DestroyBefore(ctx, tn.String(), "2026-11"); err != nil {
		t.Fatalf("destroying again: %v", err)
	}
	if err := r.DestroyBefore(ctx, tn.String(), "November"); err == nil {
		t.Error("a month that is no month was taken")
	}
}
