package account

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/jackc/pgx/v5"

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

// APIKeyID returns the id of key as ListAPIKeys shows it.
func APIKeyID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])[:domain.APIKeyIDLen]
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

// RevokeAPIKeyID revokes tenant's valid key whose id (ListAPIKeys) is id: tenant.api_key_revoked.v1
// on the key's stream, with the row's revocation in the same transaction. Nodes that cached the
// key accept it for up to Config.APIKeyCacheTTL more. Errors: ErrInvalidAPIKey when no valid key
// of tenant has that id; domain.ErrRetryable when PostgreSQL failed.
func (s *Service) RevokeAPIKeyID(ctx context.Context, tenant domain.TenantID, id string) error {
	if !domain.ValidAPIKeyID(id) {
		return ErrInvalidAPIKey
	}
	// The table is written with the events, so it names the streams of the tenant's valid keys.
	rows, err := s.pool.Query(ctx, `SELECT encode(key_hash, 'hex') FROM tenant_api_keys
		WHERE tenant_id = $1 AND substr(encode(key_hash, 'hex'), 1, 12) = $2 AND revoked_at IS NULL`, tenant.String(), id)
	if err != nil {
		return dbErr("revoke API key", err)
	}
	hashes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return dbErr("revoke API key", err)
	}
	if len(hashes) == 0 {
		return ErrInvalidAPIKey
	}
	for _, h := range hashes {
		if err := s.revoke(ctx, tenant, h); err != nil {
			return err
		}
	}
	s.keysMu.Lock()
	clear(s.keys)
	s.keysMu.Unlock()
	return nil
}
