package shred

import (
	"errors"
	"time"
)

// Config configures a Keyring. The zero value is usable.
type Config struct {
	// CacheTTL is how long a node serves a data key, or the knowledge that it is destroyed, from
	// memory. It bounds how long a key destroyed by another node can still be used here: a node
	// that destroys a key drops it at once, every other node within CacheTTL. Default 1m.
	CacheTTL time.Duration `koanf:"cache_ttl"`
	// CacheEntries bounds the keys kept in memory; past it an arbitrary entry is dropped for each
	// new one. Default 100,000.
	CacheEntries int `koanf:"cache_entries"`
}

// Defaults of Config.
const (
	DefaultCacheTTL     = time.Minute
	DefaultCacheEntries = 100_000
)

func (c *Config) setDefaults() {
	if c.CacheTTL == 0 {
		c.CacheTTL = DefaultCacheTTL
	}
	if c.CacheEntries == 0 {
		c.CacheEntries = DefaultCacheEntries
	}
}

// Validate reports bad values.
func (c Config) Validate() error {
	var errs []error
	if c.CacheTTL < 0 {
		errs = append(errs, errors.New("shred.cache_ttl: must not be negative"))
	}
	if c.CacheEntries < 0 {
		errs = append(errs, errors.New("shred.cache_entries: must not be negative"))
	}
	return errors.Join(errs...)
}
