package business

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Store writes the business read model of every tenant (Apply) and answers queries from the Redis
// caches backed by the tenant's MySQL tables. It is safe for concurrent use.
//
// Reads are cache-aside (DESIGN §7): Redis first; on a miss MySQL, then the entry is refilled with
// CacheTTL. When Redis fails the query answers from MySQL, logs a warning and skips Redis for
// RedisBackoff. Writes go to MySQL first; the caches they affect are invalidated after the commit.
type Store struct {
	router *tenantdb.Router
	rdb    redis.UniversalClient // nil: no caches, every query reads MySQL
	cfg    Config
	log    *slog.Logger
	// redisDownUntil is the UnixNano time before which Redis is not asked.
	redisDownUntil atomic.Int64

	mu      sync.Mutex
	pending map[string]struct{} // keys whose invalidation failed, retried with the next one
}

// NewStore returns a Store over router's tenant databases with rdb for the caches. rdb may be
// nil: the Store then reads MySQL only and Apply invalidates nothing. It fails for an invalid cfg.
func NewStore(router *tenantdb.Router, rdb redis.UniversalClient, cfg Config) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if router == nil {
		return nil, errors.New("business: a tenant router is required")
	}
	return &Store{router: router, rdb: rdb, cfg: cfg, log: cfg.Logger, pending: map[string]struct{}{}}, nil
}

// EventError says which event of a batch could not be applied. Err wraps domain.ErrInvalid for an
// event that can never be applied (bad payload, another tenant, a stream id that does not match
// the payload) and domain.ErrNotFound for a group event other than group.created.v1 on a group the
// read model does not hold (its creation was not projected: the event must wait, not be dropped).
// A projector parks such an event instead of retrying it.
type EventError = readmodels.EventError

// db returns tenant's pool after checking the table names.
func (s *Store) db(ctx context.Context, tenant domain.TenantID, tables Tables) (*sql.DB, error) {
	if err := tables.Validate(); err != nil {
		return nil, err
	}
	return s.router.DB(ctx, tenant)
}

// redis returns the client, or nil when there is none or Redis failed within RedisBackoff.
func (s *Store) redis() redis.UniversalClient {
	if s.rdb == nil || time.Now().UnixNano() < s.redisDownUntil.Load() {
		return nil
	}
	return s.rdb
}

// redisFailed logs a Redis failure and stops asking Redis for RedisBackoff. A cancelled context
// is the caller's doing, not Redis's, and does not start a backoff.
func (s *Store) redisFailed(ctx context.Context, tenant domain.TenantID, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	s.redisDownUntil.Store(time.Now().Add(s.cfg.RedisBackoff).UnixNano())
	s.log.WarnContext(ctx, "redis unavailable, using MySQL", "tenant_id", tenant.String(), "what", what, "error", err)
}
