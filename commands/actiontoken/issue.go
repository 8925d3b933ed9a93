package actiontoken

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
)

// Issue creates a token: action_token.issued.v1 on the token's stream (the final word), its row,
// then the Redis entry. Bad input is a *domain.ValidationError; a store failing is a retryable
// error and the token is never shown (a token recorded whose Redis entry failed is revoked
// again, reason not_cached).
func (s *Service) Issue(ctx context.Context, in Issue) (Issued, error) {
	if _, err := ParseAction(string(in.Action)); err != nil {
		return Issued{}, err
	}
	if in.Subject == "" || len(in.Subject) > MaxSubjectLen || strings.ContainsAny(in.Subject, "\x00\r\n") {
		return Issued{}, &domain.ValidationError{Field: "subject", Reason: "bad_format", Detail: "1..128 bytes, one line"}
	}
	ttl := in.TTL
	if ttl == 0 {
		ttl = s.cfg.DefaultTTL
	}
	if ttl < time.Second || ttl > s.cfg.MaxTTL {
		return Issued{}, &domain.ValidationError{Field: "ttl_seconds", Reason: "out_of_range", Detail: fmt.Sprintf("1..%d", int(s.cfg.MaxTTL.Seconds()))}
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return Issued{}, fmt.Errorf("actiontoken: random: %w", err)
	}
	tok := "at_" + base64.RawURLEncoding.EncodeToString(raw)
	hash := hashOf(tok)
	id := tokenIDOf(hash)
	now := s.stamp()
	exp := now.Add(ttl)
	issued := domain.ActionTokenIssued{TokenID: id, Action: string(in.Action), Subject: in.Subject, CreatedBy: in.By,
		TokenSHA256: hash, IssuedAt: now, ExpiresAt: exp}
	stored, err := s.append(ctx, in.Tenant, id, 0, event{domain.EventActionTokenIssued, issued})
	if err != nil {
		return Issued{}, fmt.Errorf("actiontoken: issue: %w", err)
	}
	var t token
	_ = t.apply(stored[0])
	v, _ := json.Marshal(t.hot())
	if err := s.rdb.Set(ctx, s.key(in.Tenant, hash), v, ttl).Err(); err != nil {
		_, _ = s.append(context.WithoutCancel(ctx), in.Tenant, id, t.version,
			event{domain.EventActionTokenRevoked, domain.ActionTokenRevoked{TokenID: id, Reason: "not_cached", RevokedAt: now}})
		return Issued{}, domain.Retryable("action token", err)
	}
	return Issued{Token: tok, TokenID: id, ExpiresAt: exp}, nil
}
