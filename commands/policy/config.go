package policy

import (
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/commands/group"
)

// Config configures a Policy. The zero value is usable: New fills in the defaults. The koanf tags
// name the keys of the send_policy configuration section.
type Config struct {
	// TTL is the longest a cached state is trusted without reading the store, whatever the
	// invalidations say: the bound on staleness when an invalidation is lost. Default 2 s.
	TTL time.Duration `koanf:"ttl"`
	// Cache sizes the cache of folded states (when the Policy builds its own Loader).
	Cache group.LoaderConfig `koanf:"cache"`
	// ResubscribeBackoff is the pause before Run subscribes again after the invalidation
	// subscription failed. Default 1 s.
	ResubscribeBackoff time.Duration `koanf:"resubscribe_backoff"`
}

// Defaults of Config.
const (
	DefaultTTL                = 2 * time.Second
	DefaultResubscribeBackoff = time.Second
)

func (c *Config) setDefaults() {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.ResubscribeBackoff == 0 {
		c.ResubscribeBackoff = DefaultResubscribeBackoff
	}
}

// Validate reports every invalid field of c at once. Cache is validated by group.NewLoader.
func (c Config) Validate() error {
	var errs []error
	if c.TTL <= 0 {
		errs = append(errs, fmt.Errorf("TTL must be positive, got %s", c.TTL))
	}
	if c.ResubscribeBackoff <= 0 {
		errs = append(errs, fmt.Errorf("ResubscribeBackoff must be positive, got %s", c.ResubscribeBackoff))
	}
	return errors.Join(errs...)
}
