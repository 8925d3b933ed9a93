package shred

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/domain"
)

// Keyring seals and opens personal content under data keys per (tenant, author, month), kept in
// the data_keys table wrapped by the tenant's keeper. A key is created on the first seal of its
// author and month, and cached per node (Config.CacheTTL), so a seal costs no round trip in the
// steady state. It is safe for concurrent use.
//
// Failures: a destroyed key is domain.ErrKeyErased (sealing and opening), a value its key does
// not authenticate domain.ErrSealBroken; a keeper that cannot unwrap a stored key (the wrong
// tenant key) and an unreachable PostgreSQL are other errors, never read as erasure.
type Keyring struct {
	pool    *pgxpool.Pool
	keepers Keepers
	cfg     Config
	cache   *keyCache
	now     func() time.Time
}

var (
	_ domain.Sealer = (*Keyring)(nil)
	_ domain.Opener = (*Keyring)(nil)
)

// New returns a Keyring over pool (migrated: data_keys) and keepers.
func New(pool *pgxpool.Pool, keepers Keepers, cfg Config) (*Keyring, error) {
	cfg.setDefaults()
	var errs []error
	if pool == nil || keepers == nil {
		errs = append(errs, errors.New("shred: pool and keepers are required"))
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Keyring{pool: pool, keepers: keepers, cfg: cfg, cache: newKeyCache(cfg.CacheEntries), now: time.Now}, nil
}

// keyID names one data key.
type keyID struct {
	tenant domain.TenantID
	ref    domain.DataKeyRef
}

// nonceSize is the GCM standard nonce size; random nonces are safe far beyond the number of
// values one author seals in a month.
const nonceSize = 12

// Seal implements domain.Sealer: AES-256-GCM under the author's key of at's month, with the
// tenant, key and kind as additional data.
func (r *Keyring) Seal(ctx context.Context, tenant domain.TenantID, author domain.UserID, at time.Time, kind domain.SealKind, plain []byte) (string, error) {
	id := keyID{tenant: tenant, ref: domain.DataKeyRef{User: author, Month: domain.KeyMonth(at)}}
	aead, err := r.key(ctx, id, true)
	if err != nil {
		return "", err
	}
	s := domain.Sealed{Kind: kind, Key: id.ref, Nonce: make([]byte, nonceSize)}
	if _, err := rand.Read(s.Nonce); err != nil {
		return "", fmt.Errorf("seal: nonce: %w", err)
	}
	s.Ciphertext = aead.Seal(nil, s.Nonce, plain, s.AAD(tenant))
	return s.String(), nil
}

// Open implements domain.Opener.
func (r *Keyring) Open(ctx context.Context, tenant domain.TenantID, s domain.Sealed) ([]byte, error) {
	aead, err := r.key(ctx, keyID{tenant: tenant, ref: s.Key}, false)
	if err != nil {
		return nil, err
	}
	if len(s.Nonce) != aead.NonceSize() {
		return nil, domain.ErrSealBroken
	}
	plain, err := aead.Open(nil, s.Nonce, s.Ciphertext, s.AAD(tenant))
	if err != nil {
		return nil, domain.ErrSealBroken
	}
	return plain, nil
}

// key returns the cipher of id from the cache or the table; create makes a missing key.
func (r *Keyring) key(ctx context.Context, id keyID, create bool) (cipher.AEAD, error) {
	now := r.now()
	if e, ok := r.cache.get(id, now); ok {
		if e == nil {
			return nil, fmt.Errorf("key %s: %w", id.ref, domain.ErrKeyErased)
		}
		return e, nil
	}
	wrapped, found, err := r.load(ctx, id)
	if err != nil {
		return nil, err
	}
	if !found && create {
		if wrapped, err = r.create(ctx, id); err != nil {
			return nil, err
		}
		found = true
	}
	if !found || wrapped == nil {
		if found {
			// Destroyed for good. A key never made is not remembered: a later seal makes it.
			r.cache.put(id, nil, now.Add(r.cfg.CacheTTL))
		}
		return nil, fmt.Errorf("key %s: %w", id.ref, domain.ErrKeyErased)
	}
	aead, err := r.unwrap(ctx, id, wrapped)
	if err != nil {
		return nil, err
	}
	r.cache.put(id, aead, now.Add(r.cfg.CacheTTL))
	return aead, nil
}

// load reads the wrapped key of id: found false when there is no row (a month of a user that
// sealed nothing then), wrapped nil when it was destroyed.
func (r *Keyring) load(ctx context.Context, id keyID) (wrapped []byte, found bool, err error) {
	err = r.pool.QueryRow(ctx, `SELECT wrapped FROM data_keys WHERE tenant_id = $1 AND user_id = $2 AND month = $3`,
		id.tenant.String(), id.ref.User.Int64(), id.ref.Month).Scan(&wrapped)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read data key %s: %w: %w", id.ref, domain.ErrRetryable, err)
	}
	return wrapped, true, nil
}

// create makes, wraps and stores a new key for id unless the user was erased, and returns the
// stored wrapped key, which is another node's when it won the race (nil: erased).
func (r *Keyring) create(ctx context.Context, id keyID) ([]byte, error) {
	k, err := r.keepers.Keeper(ctx, id.tenant)
	if err != nil {
		return nil, err
	}
	dek := make([]byte, 32)
	if _, err := rand.Read(dek); err != nil {
		return nil, fmt.Errorf("new data key: %w", err)
	}
	wrapped, err := k.Encrypt(ctx, dek)
	clear(dek)
	if err != nil {
		return nil, fmt.Errorf("wrap data key %s: %w", id.ref, err)
	}
	if _, err := r.pool.Exec(ctx, `INSERT INTO data_keys (tenant_id, user_id, month, wrapped)
		SELECT $1, $2, $3, $4 WHERE NOT EXISTS (
			SELECT 1 FROM data_keys WHERE tenant_id = $1 AND user_id = $2 AND month = '*')
		ON CONFLICT (tenant_id, user_id, month) DO NOTHING`,
		id.tenant.String(), id.ref.User.Int64(), id.ref.Month, wrapped); err != nil {
		return nil, fmt.Errorf("store data key %s: %w: %w", id.ref, domain.ErrRetryable, err)
	}
	stored, found, err := r.load(ctx, id)
	if err != nil || !found {
		return nil, err // not found: the user is erased
	}
	return stored, nil
}

// unwrap asks the keeper for the key and builds its cipher.
func (r *Keyring) unwrap(ctx context.Context, id keyID, wrapped []byte) (cipher.AEAD, error) {
	k, err := r.keepers.Keeper(ctx, id.tenant)
	if err != nil {
		return nil, err
	}
	dek, err := k.Decrypt(ctx, wrapped)
	if err != nil {
		return nil, fmt.Errorf("unwrap data key %s of tenant %s (is the keeper's key the one it was wrapped with?): %w", id.ref, id.tenant, err)
	}
	defer clear(dek)
	block, err := aes.NewCipher(dek)
	if err != nil {
		return nil, fmt.Errorf("data key %s: %w", id.ref, err)
	}
	return cipher.NewGCM(block)
}

// DestroyUser destroys every data key of user in tenant, of every month, and refuses new ones:
// everything the user sealed reads as erased from now on, on this node at once and on every
// other node within Config.CacheTTL. It returns how many keys it destroyed; destroying again
// is harmless. Errors wrap domain.ErrRetryable.
func (r *Keyring) DestroyUser(ctx context.Context, tenant domain.TenantID, user domain.UserID) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE data_keys SET wrapped = NULL, destroyed_at = now()
			WHERE tenant_id = $1 AND user_id = $2 AND wrapped IS NOT NULL`, tenant.String(), user.Int64())
		if err != nil {
			return err
		}
		n = int(tag.RowsAffected())
		_, err = tx.Exec(ctx, `INSERT INTO data_keys (tenant_id, user_id, month, wrapped, destroyed_at)
			VALUES ($1, $2, '*', NULL, now()) ON CONFLICT (tenant_id, user_id, month) DO NOTHING`, tenant.String(), user.Int64())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("destroy data keys of %s/%s: %w: %w", tenant, user, domain.ErrRetryable, err)
	}
	r.cache.dropUser(tenant, user)
	return n, nil
}

// DestroyBefore destroys every data key of tenant of the months before month ("2006-01", the
// first month the tenant keeps): retention's share of crypto-shredding (retention.MonthKeys).
// What those keys sealed reads as erased, in the log and on Kafka too; on other nodes within
// Config.CacheTTL. Destroying again is harmless. Errors wrap domain.ErrRetryable.
func (r *Keyring) DestroyBefore(ctx context.Context, tenant, month string) error {
	t, err := domain.NewTenantID(tenant)
	if err != nil {
		return err
	}
	if _, err := time.Parse("2006-01", month); err != nil {
		return fmt.Errorf("destroy data keys of %s before %q: not a month: %w", tenant, month, err)
	}
	if _, err := r.pool.Exec(ctx, `UPDATE data_keys SET wrapped = NULL, destroyed_at = now()
		WHERE tenant_id = $1 AND month <> '*' AND month < $2 AND wrapped IS NOT NULL`, tenant, month); err != nil {
		return fmt.Errorf("destroy data keys of %s before %s: %w: %w", tenant, month, domain.ErrRetryable, err)
	}
	r.cache.dropBefore(t, month)
	return nil
}

// Forget drops every cached key of user in tenant, so this node reads the table again before
// it next seals or opens for the user: a node told of an erasure elsewhere calls it to stop
// using destroyed keys at once rather than within Config.CacheTTL.
func (r *Keyring) Forget(tenant domain.TenantID, user domain.UserID) { r.cache.dropUser(tenant, user) }
