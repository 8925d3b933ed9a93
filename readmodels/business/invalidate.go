package business

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/rediskeys"
)

// errRedisBackoff is why an invalidation was queued without asking Redis.
var errRedisBackoff = errors.New("redis failed recently; invalidation queued")

// minFenceTTL is the shortest a fence lives. A fence only has to outlast a reader's window between
// reading it and filling the entry, which request deadlines keep to seconds.
const minFenceTTL = time.Minute

// invalidateChunk is the most keys one pipeline invalidates.
const invalidateChunk = 500

// Write side of the cache-aside protocol (see cache.go): every entry a committed batch made stale
// is deleted after a new fence is set, rather than updated in place. Deleting is idempotent and
// order-free, so redeliveries, concurrent projectors and late events can never leave an entry
// that disagrees with MySQL; the price is one miss (one indexed MySQL read) per change, which
// for a large group's member set is one range scan of its member index.

// invalidate drops keys, and any keys an earlier failure left pending, from Redis. On failure the
// keys stay pending, to be retried by the next call, and the error wraps domain.ErrRetryable.
func (s *Store) invalidate(ctx context.Context, tenant domain.TenantID, keys []string) error {
	if s.rdb == nil {
		return nil
	}
	batch := s.takePending(keys)
	if len(batch) == 0 {
		return nil
	}
	rdb := s.redis()
	if rdb == nil {
		s.requeue(ctx, tenant, batch)
		return domain.Retryable("invalidate caches", errRedisBackoff)
	}
	if err := s.dropKeys(ctx, rdb, batch); err != nil {
		s.requeue(ctx, tenant, batch)
		if ctx.Err() == nil {
			s.redisDownUntil.Store(time.Now().Add(s.cfg.RedisBackoff).UnixNano())
		}
		return domain.Retryable("invalidate caches", err)
	}
	return nil
}

// dropKeys sets a new fence for each key and deletes it, fence first.
func (s *Store) dropKeys(ctx context.Context, rdb redis.UniversalClient, keys []string) error {
	token, err := newToken()
	if err != nil {
		return err
	}
	ttl := max(s.cfg.CacheTTL, minFenceTTL)
	for start := 0; start < len(keys); start += invalidateChunk {
		chunk := keys[start:min(start+invalidateChunk, len(keys))]
		cmds, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range chunk {
				p.Set(ctx, k+fenceSuffix, token, ttl)
				p.Del(ctx, k)
			}
			return nil
		})
		if err := cmdErr(cmds...); err != nil {
			return fmt.Errorf("redis: %w", err)
		}
	}
	return nil
}

func newToken() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// takePending returns keys plus every pending key, emptying the pending set.
func (s *Store) takePending(keys []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return keys
	}
	out := make([]string, 0, len(keys)+len(s.pending))
	out = append(out, keys...)
	for k := range s.pending {
		out = append(out, k)
	}
	clear(s.pending)
	return out
}

// requeue keeps keys for the next invalidation, up to MaxPendingInvalidations; the rest are
// dropped and logged (they expire with CacheTTL).
func (s *Store) requeue(ctx context.Context, tenant domain.TenantID, keys []string) {
	s.mu.Lock()
	dropped := 0
	for _, k := range keys {
		if len(s.pending) >= s.cfg.MaxPendingInvalidations {
			dropped++
			continue
		}
		s.pending[k] = struct{}{}
	}
	s.mu.Unlock()
	if dropped > 0 {
		s.log.WarnContext(ctx, "cache invalidations dropped; entries expire with the cache TTL",
			"tenant_id", tenant.String(), "dropped", dropped, "ttl", s.cfg.CacheTTL)
	}
}

// PendingInvalidations reports how many cache keys wait for Redis to come back.
func (s *Store) PendingInvalidations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// InvalidateTenant drops every cache entry of tenant (groups, relations, user profiles) with the
// same fenced delete Apply uses, and returns how many entries it dropped. Run it after SwapTables
// or any repair of the MySQL tables, whose changes Apply did not see. It needs Redis: a failure
// wraps domain.ErrRetryable.
func (s *Store) InvalidateTenant(ctx context.Context, tenant domain.TenantID) (int, error) {
	if s.rdb == nil {
		return 0, nil
	}
	var mu sync.Mutex
	var keys []string
	ks := s.keyspace(tenant)
	err := rediskeys.Scan(ctx, s.rdb, ks.scanPattern(), func(k string) {
		if ks.isCacheKey(k) {
			mu.Lock()
			keys = append(keys, k)
			mu.Unlock()
		}
	})
	if err != nil {
		return 0, domain.Retryable("invalidate tenant caches", fmt.Errorf("redis: %w", err))
	}
	if err := s.dropKeys(ctx, s.rdb, keys); err != nil {
		return 0, domain.Retryable("invalidate tenant caches", err)
	}
	return len(keys), nil
}
