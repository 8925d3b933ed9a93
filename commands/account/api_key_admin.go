package account

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"time"

	"github.com/imledger/imledger/domain"
)

// APIKeyInfo describes a tenant API key without revealing it: ID is the first 12 hex digits of
// the key's SHA-256, which is all that is stored.
type APIKeyInfo struct {
	ID        string
	Tenant    domain.TenantID
	CreatedAt time.Time
	RevokedAt time.Time // zero while the key is valid
}

// apiKeyIDLen is the length of an API key id in hex digits.
const apiKeyIDLen = 12

var apiKeyIDRe = regexp.MustCompile(`^[0-9a-f]{12}$`)

// APIKeyID returns the id of key as ListAPIKeys shows it.
func APIKeyID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])[:apiKeyIDLen]
}

// ListAPIKeys returns tenant's API keys, oldest first, revoked ones included. Errors:
// domain.ErrRetryable when PostgreSQL failed.
func (s *Service) ListAPIKeys(ctx context.Context, tenant domain.TenantID) ([]APIKeyInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT substr(encode(key_hash, 'hex'), 1, 12), created_at, revoked_at
		FROM tenant_api_keys WHERE tenant_id = $1 ORDER BY created_at, key_hash`, tenant.String())
	if err != nil {
		return nil, dbErr("list API keys", err)
	}
	defer rows.Close()
	var out []APIKeyInfo
	for rows.Next() {
		k := APIKeyInfo{Tenant: tenant}
		var revoked *time.Time
		if err := rows.Scan(&k.ID, &k.CreatedAt, &revoked); err != nil {
			return nil, dbErr("list API keys", err)
		}
		k.CreatedAt = k.CreatedAt.UTC()
		if revoked != nil {
			k.RevokedAt = revoked.UTC()
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("list API keys", err)
	}
	return out, nil
}

// RevokeAPIKeyID revokes tenant's valid key whose id (ListAPIKeys) is id. Nodes that cached the
// key accept it for up to Config.APIKeyCacheTTL more. Errors: ErrInvalidAPIKey when no valid key
// of tenant has that id; domain.ErrRetryable when PostgreSQL failed.
func (s *Service) RevokeAPIKeyID(ctx context.Context, tenant domain.TenantID, id string) error {
	if !apiKeyIDRe.MatchString(id) {
		return ErrInvalidAPIKey
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tenant_api_keys SET revoked_at = now()
		WHERE tenant_id = $1 AND substr(encode(key_hash, 'hex'), 1, 12) = $2 AND revoked_at IS NULL`, tenant.String(), id)
	if err != nil {
		return dbErr("revoke API key", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrInvalidAPIKey
	}
	s.keysMu.Lock()
	clear(s.keys)
	s.keysMu.Unlock()
	return nil
}
