package account

import (
	"context"
	"fmt"
	"time"

	"github.com/imledger/imledger/commands/account/passhash"
	"github.com/imledger/imledger/domain"
)

// hashPassword is passhash.Hash in a hashing slot.
func (s *Service) hashPassword(ctx context.Context, password string) (string, error) {
	release, err := s.hashSlot(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	return passhash.Hash(password, s.cfg.Password)
}

// verifyPassword is passhash.Verify in a hashing slot.
func (s *Service) verifyPassword(ctx context.Context, password, hash string) error {
	release, err := s.hashSlot(ctx)
	if err != nil {
		return err
	}
	defer release()
	return passhash.Verify(password, hash)
}

// hashSlot waits up to Config.HashWait for one of the Config.HashConcurrency hashing slots and
// returns the function that gives it back. Errors: a *domain.RetryableError wrapping
// ErrHashingBusy when the wait ran out, ctx's error when ctx ended first.
func (s *Service) hashSlot(ctx context.Context) (release func(), err error) {
	wait := time.NewTimer(s.cfg.HashWait)
	defer wait.Stop()
	select {
	case s.hashSlots <- struct{}{}:
		return func() { <-s.hashSlots }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait to hash a password: %w", ctx.Err())
	case <-wait.C:
		return nil, domain.Retryable("wait to hash a password", ErrHashingBusy)
	}
}
