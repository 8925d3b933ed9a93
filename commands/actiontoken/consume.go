package actiontoken

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
)

// Consume uses token for action, once. Redis answers the hot check (a token it does not hold is
// read from its stream, so a Redis restart loses none); the append of action_token.consumed.v1
// at the version the token was read at decides, so of any number of concurrent consumers exactly
// one succeeds and the others, losing the stream to it (domain.ErrConcurrency), are refused.
// Refusals (*domain.DeniedError): action_token_invalid, action_token_used, action_token_expired.
// Redis down: a retryable error, nothing consumed (fail closed).
func (s *Service) Consume(ctx context.Context, tenant domain.TenantID, token string, action Action, by domain.UserID) (Consumed, error) {
	return s.ConsumeIf(ctx, tenant, token, action, by, nil)
}

// ConsumeIf is Consume with a precondition: check (when not nil) is given the token, found
// active and unexpired, before it is consumed; an error from check is returned and the token
// stays active. What the token is for can so be refused without spending it.
func (s *Service) ConsumeIf(ctx context.Context, tenant domain.TenantID, tok string, action Action, by domain.UserID,
	check func(Consumed) error) (Consumed, error) {
	if !strings.HasPrefix(tok, "at_") || len(tok) > 64 {
		return Consumed{}, domain.Deny(ReasonTokenInvalid)
	}
	hash := hashOf(tok)
	key := s.key(tenant, hash)
	h, err := s.hotEntry(ctx, tenant, key, hash)
	if err != nil {
		return Consumed{}, err
	}
	for attempt := 1; ; attempt++ {
		now := s.stamp()
		if h.Action != action {
			return Consumed{}, domain.Deny(ReasonTokenInvalid)
		}
		if now.UnixMilli() >= h.Exp {
			return Consumed{}, domain.Deny(ReasonTokenExpired)
		}
		c := Consumed{TokenID: h.ID, Action: h.Action, Subject: h.Subject, IssuedBy: domain.UserID(*h.By)}
		if check != nil {
			if err := check(c); err != nil {
				return Consumed{}, err
			}
		}
		_, err := s.append(ctx, tenant, h.ID, h.V, event{domain.EventActionTokenConsumed,
			domain.ActionTokenConsumed{TokenID: h.ID, By: by, ConsumedAt: now}})
		if errors.Is(err, domain.ErrConcurrency) && attempt < maxAttempts {
			// Another consumer, a revocation or a give-back moved the stream: read it again.
			if h, err = s.active(ctx, tenant, hash, h.ID); err != nil {
				return Consumed{}, err
			}
			continue
		}
		if errors.Is(err, domain.ErrConcurrency) {
			return Consumed{}, domain.Deny(ReasonTokenUsed)
		}
		if err != nil {
			return Consumed{}, fmt.Errorf("actiontoken: consume: %w", err)
		}
		// The stream decided; the cache only stops serving the token. A failure here costs a
		// stream read on the next try, which refuses it.
		_ = s.rdb.Del(ctx, key).Err()
		c.ConsumedAt = now
		return c, nil
	}
}

// hotEntry returns what Redis holds of the token, or, when Redis does not hold it (or holds it
// as an older version of this code cached it), what its stream says: an active token or a
// refusal. Redis down is a retryable error.
func (s *Service) hotEntry(ctx context.Context, tenant domain.TenantID, key, hash string) (hot, error) {
	raw, err := s.rdb.Get(ctx, key).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return s.active(ctx, tenant, hash, "")
	case err != nil:
		return hot{}, domain.Retryable("action token", err)
	}
	var h hot
	if err := json.Unmarshal(raw, &h); err != nil {
		return hot{}, fmt.Errorf("actiontoken: cached token: %w", err)
	}
	if h.By == nil || h.V == 0 {
		return s.active(ctx, tenant, hash, h.ID)
	}
	return h, nil
}

// active reads the token from its stream: the hot entry of an active token, action_token_invalid
// for an unknown one, action_token_used for one consumed or revoked.
func (s *Service) active(ctx context.Context, tenant domain.TenantID, hash, id string) (hot, error) {
	t, err := s.load(ctx, tenant, hash, id)
	switch {
	case err != nil:
		return hot{}, err
	case t.version == 0 || t.issued.TokenSHA256 != hash:
		return hot{}, domain.Deny(ReasonTokenInvalid)
	case t.state != StateActive:
		return hot{}, domain.Deny(ReasonTokenUsed)
	}
	return t.hot(), nil
}
