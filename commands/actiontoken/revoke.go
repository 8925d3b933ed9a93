package actiontoken

import (
	"context"
	"errors"
	"fmt"

	"github.com/imledger/imledger/domain"
)

// Revoke ends an active token by its id: action_token.revoked.v1 on its stream, after its Redis
// entry is dropped. domain.ErrNotFound when there is no active token with that id; Redis down is
// a retryable error and nothing is revoked.
func (s *Service) Revoke(ctx context.Context, tenant domain.TenantID, tokenID string) error {
	for attempt := 1; ; attempt++ {
		t, err := s.load(ctx, tenant, "", tokenID)
		if err != nil {
			return err
		}
		if t.version == 0 || t.state != StateActive {
			return domain.ErrNotFound
		}
		if err := s.rdb.Del(ctx, s.key(tenant, t.issued.TokenSHA256)).Err(); err != nil {
			return domain.Retryable("action token", err)
		}
		_, err = s.append(ctx, tenant, t.issued.TokenID, t.version, event{domain.EventActionTokenRevoked,
			domain.ActionTokenRevoked{TokenID: t.issued.TokenID, Reason: "revoked", RevokedAt: s.stamp()}})
		if errors.Is(err, domain.ErrConcurrency) && attempt < maxAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("actiontoken: revoke: %w", err)
		}
		return nil
	}
}

// Unconsume gives back a token that user by consumed (tokenID is Consumed.TokenID) when what it
// was spent on did not happen: a join on an invite link refused when it was written, after the
// precondition had passed. action_token.unconsumed.v1 makes it active again, so it serves the next
// consumer until it expires (Redis no longer holds it: a consume reads its stream).
// domain.ErrNotFound when no such consumed token exists; a store failure is retryable.
func (s *Service) Unconsume(ctx context.Context, tenant domain.TenantID, tokenID string, by domain.UserID) error {
	for attempt := 1; ; attempt++ {
		t, err := s.load(ctx, tenant, "", tokenID)
		if err != nil {
			return err
		}
		if t.version == 0 || t.state != StateConsumed || t.consumedBy != by {
			return domain.ErrNotFound
		}
		_, err = s.append(ctx, tenant, t.issued.TokenID, t.version, event{domain.EventActionTokenUnconsumed,
			domain.ActionTokenUnconsumed{TokenID: t.issued.TokenID, By: by, UnconsumedAt: s.stamp()}})
		if errors.Is(err, domain.ErrConcurrency) && attempt < maxAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("actiontoken: unconsume: %w", err)
		}
		return nil
	}
}
