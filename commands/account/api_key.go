package account

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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

// CreateAPIKey creates a new API key for tenant and returns it: tenant.api_key_created.v1 on the
// key's stream, with its row of tenant_api_keys written in the same transaction. Only the key's
// SHA-256 is recorded: the key is shown this once and cannot be recovered. Errors:
// *domain.ValidationError for a zero tenant, domain.ErrRetryable when PostgreSQL failed.
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
	h := hex.EncodeToString(sum[:])
	stream := domain.APIKeyStreamID(h)
	// PostgreSQL keeps microseconds: the row and the event say the same time.
	now := s.now().UTC().Truncate(time.Microsecond)
	env, err := apiKeyEnvelope(tenant, stream, 1, domain.EventTenantAPIKeyCreated,
		domain.TenantAPIKeyCreated{KeyID: h[:domain.APIKeyIDLen], KeySHA256: h, CreatedAt: now})
	if err != nil {
		return "", err
	}
	if _, err := s.store.AppendWith(ctx, tenant, stream, 0, []domain.Envelope{env}, applyAPIKeys); err != nil {
		return "", fmt.Errorf("create API key: %w", err)
	}
	return key, nil
}

// apiKeyEnvelope builds an API key event of the system actor (keys are managed by operators'
// tools, which name no one).
func apiKeyEnvelope(tenant domain.TenantID, stream string, version int64, typ domain.EventType, payload any) (domain.Envelope, error) {
	env, err := domain.NewEnvelope(tenant, stream, version, typ, domain.Actor{Type: domain.ActorSystem, ID: domain.SourceService}, payload)
	env.BizID = tenant.String()
	return env, err
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
	var tenant string
	err := s.pool.QueryRow(ctx, `SELECT tenant_id FROM tenant_api_keys WHERE key_hash = $1`, sum[:]).Scan(&tenant)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrInvalidAPIKey
	}
	if err != nil {
		return dbErr("revoke API key", err)
	}
	t, err := domain.NewTenantID(tenant)
	if err != nil {
		return fmt.Errorf("revoke API key: stored tenant: %w", err)
	}
	err = s.revoke(ctx, t, hex.EncodeToString(sum[:]))
	s.keysMu.Lock()
	delete(s.keys, sum)
	s.keysMu.Unlock()
	return err
}

// revoke appends tenant.api_key_revoked.v1 to the stream of the key whose SHA-256 is h, with the
// row's revocation in the same transaction, if the stream says the key is valid; a lost race is
// decided again. ErrInvalidAPIKey when it is unknown or revoked.
func (s *Service) revoke(ctx context.Context, tenant domain.TenantID, h string) error {
	stream := domain.APIKeyStreamID(h)
	for attempt := 1; ; attempt++ {
		last, found, err := s.store.LastEvent(ctx, tenant, stream)
		if err != nil {
			return fmt.Errorf("revoke API key: %w", err)
		}
		if !found || last.EventType != domain.EventTenantAPIKeyCreated {
			return ErrInvalidAPIKey
		}
		env, err := apiKeyEnvelope(tenant, stream, last.StreamVersion+1, domain.EventTenantAPIKeyRevoked,
			domain.TenantAPIKeyRevoked{KeyID: h[:domain.APIKeyIDLen], KeySHA256: h, RevokedAt: s.now().UTC().Truncate(time.Microsecond)})
		if err != nil {
			return err
		}
		_, err = s.store.AppendWith(ctx, tenant, stream, last.StreamVersion, []domain.Envelope{env}, applyAPIKeys)
		if errors.Is(err, domain.ErrConcurrency) && attempt < maxRevokeAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("revoke API key: %w", err)
		}
		return nil
	}
}

// maxRevokeAttempts bounds how often a revocation is decided again after losing a race.
const maxRevokeAttempts = 5

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
