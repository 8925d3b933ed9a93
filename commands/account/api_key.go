package account

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/domain"
)

// APIKeyPrefix starts every tenant API key, so a leaked key is easy to recognise.
const APIKeyPrefix = "imk_"

// apiKeyLen is the length of a key: the prefix and 32 random bytes in unpadded base64url.
var apiKeyLen = len(APIKeyPrefix) + base64.RawURLEncoding.EncodedLen(32)

// maxCachedKeys bounds the verified-key cache; it is emptied when full.
const maxCachedKeys = 10000

type cachedKey struct {
	tenant  domain.TenantID
	expires time.Time
}

// CreateAPIKey creates a new API key for tenant and returns it. Only its SHA-256 is stored:
// the key is shown this once and cannot be recovered. Errors: *domain.ValidationError for a
// zero tenant, domain.ErrRetryable when PostgreSQL failed.
func (s *Service) CreateAPIKey(ctx context.Context, tenant domain.TenantID) (string, error) {
	if tenant.IsZero() {
		return "", &domain.ValidationError{Field: "tenant_id", Reason: "required"}
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("create API key: %w", err)
	}
	key := APIKeyPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(key))
	if _, err := s.pool.Exec(ctx, `INSERT INTO tenant_api_keys (key_hash, tenant_id, created_at) VALUES ($1, $2, now())`,
		sum[:], tenant.String()); err != nil {
		return "", dbErr("create API key", err)
	}
	return key, nil
}

// VerifyAPIKey returns the tenant of a valid, unrevoked key. Valid keys are cached for
// Config.APIKeyCacheTTL, so a revocation reaches a node within that time. Errors:
// ErrInvalidAPIKey; domain.ErrRetryable when PostgreSQL failed.
func (s *Service) VerifyAPIKey(ctx context.Context, key string) (domain.TenantID, error) {
	if len(key) != apiKeyLen || !strings.HasPrefix(key, APIKeyPrefix) {
		return domain.TenantID{}, ErrInvalidAPIKey
	}
	sum := sha256.Sum256([]byte(key))
	now := s.now()
	if t, ok := s.cachedKey(sum, now); ok {
		return t, nil
	}
	var tenant string
	err := s.pool.QueryRow(ctx, `SELECT tenant_id FROM tenant_api_keys WHERE key_hash = $1 AND revoked_at IS NULL`, sum[:]).Scan(&tenant)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.TenantID{}, ErrInvalidAPIKey
	}
	if err != nil {
		return domain.TenantID{}, dbErr("verify API key", err)
	}
	t, err := domain.NewTenantID(tenant)
	if err != nil {
		return domain.TenantID{}, fmt.Errorf("verify API key: stored tenant: %w", err)
	}
	s.cacheKey(sum, t, now)
	return t, nil
}

// RevokeAPIKey revokes key. Errors: ErrInvalidAPIKey when it is malformed, unknown or already
// revoked; domain.ErrRetryable when PostgreSQL failed.
func (s *Service) RevokeAPIKey(ctx context.Context, key string) error {
	if len(key) != apiKeyLen || !strings.HasPrefix(key, APIKeyPrefix) {
		return ErrInvalidAPIKey
	}
	sum := sha256.Sum256([]byte(key))
	tag, err := s.pool.Exec(ctx, `UPDATE tenant_api_keys SET revoked_at = now() WHERE key_hash = $1 AND revoked_at IS NULL`, sum[:])
	if err != nil {
		return dbErr("revoke API key", err)
	}
	s.keysMu.Lock()
	delete(s.keys, sum)
	s.keysMu.Unlock()
	if tag.RowsAffected() == 0 {
		return ErrInvalidAPIKey
	}
	return nil
}

func (s *Service) cachedKey(sum [32]byte, now time.Time) (domain.TenantID, bool) {
	if s.cfg.APIKeyCacheTTL < 0 {
		return domain.TenantID{}, false
	}
	s.keysMu.Lock()
	defer s.keysMu.Unlock()
	c, ok := s.keys[sum]
	if !ok || !now.Before(c.expires) {
		return domain.TenantID{}, false
	}
	return c.tenant, true
}

func (s *Service) cacheKey(sum [32]byte, tenant domain.TenantID, now time.Time) {
	if s.cfg.APIKeyCacheTTL < 0 {
		return
	}
	s.keysMu.Lock()
	defer s.keysMu.Unlock()
	if len(s.keys) >= maxCachedKeys {
		clear(s.keys)
	}
	s.keys[sum] = cachedKey{tenant: tenant, expires: now.Add(s.cfg.APIKeyCacheTTL)}
}
