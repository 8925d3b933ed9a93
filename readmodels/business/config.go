package business

import (
	"errors"
	"log/slog"
	"strings"
	"time"
)

// Config configures a Store.
type Config struct {
	// KeyPrefix starts every Redis key, followed by the tenant id: "<prefix><tenant>:group:{7}:members".
	// Tests use a unique one. Default "im:". Must not contain '{' or '}', which would break the
	// hash tags that keep one group's (or one user's) keys in one Redis Cluster slot.
	KeyPrefix string
	// CacheTTL is how long a cache entry filled from MySQL lives. It also bounds how long an entry
	// can stay stale when an invalidation is lost to a Redis outage. Default 10 minutes; at least 1s.
	CacheTTL time.Duration
	// RedisBackoff is how long queries go straight to MySQL, and invalidations are queued instead
	// of sent, after a Redis failure, so an outage costs one timeout per RedisBackoff rather than
	// one per call. Default 5s.
	RedisBackoff time.Duration
	// DefaultPageSize is the member page size when Members is asked for limit <= 0. Default 50.
	DefaultPageSize int
	// MaxPageSize caps a member page; larger limits are cut to it. Default 500.
	MaxPageSize int
	// MaxPendingInvalidations caps the cache keys whose invalidation failed and waits for Redis to
	// come back; keys beyond it are dropped (they expire after CacheTTL). Default 10000.
	MaxPendingInvalidations int
	// Logger receives a warning when Redis fails and the store falls back to MySQL. Nil discards.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.KeyPrefix == "" {
		c.KeyPrefix = "im:"
	}
	if c.CacheTTL == 0 {
		c.CacheTTL = 10 * time.Minute
	}
	if c.RedisBackoff == 0 {
		c.RedisBackoff = 5 * time.Second
	}
	if c.DefaultPageSize == 0 {
		c.DefaultPageSize = 50
	}
	if c.MaxPageSize == 0 {
		c.MaxPageSize = 500
	}
	if c.MaxPendingInvalidations == 0 {
		c.MaxPendingInvalidations = 10000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	if strings.ContainsAny(c.KeyPrefix, "{}") {
		errs = append(errs, errors.New("business: KeyPrefix must not contain braces"))
	}
	if c.CacheTTL < time.Second {
		errs = append(errs, errors.New("business: CacheTTL must be at least 1s"))
	}
	if c.RedisBackoff < 0 {
		errs = append(errs, errors.New("business: RedisBackoff must not be negative"))
	}
	if c.DefaultPageSize < 1 || c.MaxPageSize < 1 || c.DefaultPageSize > c.MaxPageSize {
		errs = append(errs, errors.New("business: page sizes must be positive, the default at most the maximum"))
	}
	if c.MaxPendingInvalidations < 0 {
		errs = append(errs, errors.New("business: MaxPendingInvalidations must not be negative"))
	}
	return errors.Join(errs...)
}
