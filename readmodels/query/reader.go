package query

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// Message is one message of a history page.
type Message = readmodels.Message

// RedisBackoff is how long a Reader answers from MySQL alone after a Redis failure, so an outage
// costs one timeout per RedisBackoff instead of one per query.
const RedisBackoff = 5 * time.Second

// Reader answers history and unread queries. It is safe for concurrent use.
type Reader struct {
	store  *msgstore.Store
	hot    *hot.Store
	tables msgstore.Tables
	log    *slog.Logger
	// redisDownUntil is the UnixNano time before which Redis is not asked.
	redisDownUntil atomic.Int64
}

// NewReader returns a Reader over the MySQL store and, if hotStore is not nil, the Redis cache.
// logger receives a warning each time Redis fails and queries fall back to MySQL; nil discards.
func NewReader(store *msgstore.Store, hotStore *hot.Store, logger *slog.Logger) *Reader {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Reader{store: store, hot: hotStore, tables: msgstore.DefaultTables(), log: logger}
}

// hotStore returns the cache, or nil when there is none or Redis failed within RedisBackoff.
func (r *Reader) hotStore() *hot.Store {
	if r.hot == nil || time.Now().UnixNano() < r.redisDownUntil.Load() {
		return nil
	}
	return r.hot
}

// redisFailed logs a Redis failure and stops asking Redis for RedisBackoff.
func (r *Reader) redisFailed(ctx context.Context, tenant domain.TenantID, what string, err error) {
	r.redisDownUntil.Store(time.Now().Add(RedisBackoff).UnixNano())
	r.log.WarnContext(ctx, "redis unavailable, reading MySQL", "tenant_id", tenant.String(), "what", what, "error", err)
}
