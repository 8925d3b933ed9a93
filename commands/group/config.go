package group

import (
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
)

// Config configures the group command handlers. The zero value is usable: New fills in the
// defaults. The koanf tags name the keys of the groups configuration section.
type Config struct {
	// MaxMembers is the member limit of every group, the owner included; joins past it are
	// refused group_full. Default domain.DefaultMaxGroupMembers (10,000).
	MaxMembers int `koanf:"max_members"`
	// MaxAttempts bounds how often a command that lost an optimistic-concurrency race reloads
	// its aggregates and decides again before it answers domain.ErrConcurrency. Default 10.
	MaxAttempts int `koanf:"max_attempts"`
	// RetryBackoff is the upper bound of the random pause before the second attempt; later
	// attempts pause up to a multiple of it. Default 2 ms.
	RetryBackoff time.Duration `koanf:"retry_backoff"`
	// MaxCreateAttempts bounds how often CreateGroup draws a new group id when the drawn one is
	// already taken. Default 3.
	MaxCreateAttempts int `koanf:"max_create_attempts"`
	// JoinBatch is the most joins into one group this process commits in one transaction.
	// Joins into one group are serialised by the group stream's version; batching them lets
	// concurrent joins share a commit. 1 turns batching off. Default 128.
	JoinBatch int `koanf:"join_batch"`
	// BatchTimeout bounds the store work of one batch of joins, retries included; past it the
	// batch's joins fail with a retryable error. Default 10 s.
	BatchTimeout time.Duration `koanf:"batch_timeout"`
	// Loader sizes the cache of folded aggregates the handlers keep so a load only reads the
	// events appended since the last one.
	Loader LoaderConfig `koanf:"loader"`
}

// Defaults of Config.
const (
	DefaultMaxAttempts       = 10
	DefaultRetryBackoff      = 2 * time.Millisecond
	DefaultMaxCreateAttempts = 3
	DefaultJoinBatch         = 128
	DefaultBatchTimeout      = 10 * time.Second
)

func (c *Config) setDefaults() {
	if c.MaxMembers == 0 {
		c.MaxMembers = domain.DefaultMaxGroupMembers
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.MaxCreateAttempts == 0 {
		c.MaxCreateAttempts = DefaultMaxCreateAttempts
	}
	if c.JoinBatch == 0 {
		c.JoinBatch = DefaultJoinBatch
	}
	if c.BatchTimeout == 0 {
		c.BatchTimeout = DefaultBatchTimeout
	}
	c.Loader.setDefaults()
}

// Validate reports every invalid field of c at once.
func (c Config) Validate() error {
	var errs []error
	if c.MaxMembers <= 0 {
		errs = append(errs, fmt.Errorf("MaxMembers must be positive, got %d", c.MaxMembers))
	}
	if c.MaxAttempts <= 0 {
		errs = append(errs, fmt.Errorf("MaxAttempts must be positive, got %d", c.MaxAttempts))
	}
	if c.RetryBackoff < 0 {
		errs = append(errs, fmt.Errorf("RetryBackoff must not be negative, got %s", c.RetryBackoff))
	}
	if c.MaxCreateAttempts <= 0 {
		errs = append(errs, fmt.Errorf("MaxCreateAttempts must be positive, got %d", c.MaxCreateAttempts))
	}
	if c.JoinBatch <= 0 || c.JoinBatch > 400 {
		errs = append(errs, fmt.Errorf("JoinBatch must be 1 to 400 (two events each, within the store's batch limit), got %d", c.JoinBatch))
	}
	if c.BatchTimeout <= 0 {
		errs = append(errs, fmt.Errorf("BatchTimeout must be positive, got %s", c.BatchTimeout))
	}
	if err := c.Loader.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("Loader: %w", err))
	}
	return errors.Join(errs...)
}

// LoaderConfig configures a Loader.
type LoaderConfig struct {
	// MaxEntries bounds the folded states kept in memory (group, membership, relation and
	// profile streams together); the least recently used go first. Default 100,000.
	MaxEntries int `koanf:"max_entries"`
	// Shards splits the cache so concurrent lookups rarely share a lock. Default 32.
	Shards int `koanf:"shards"`
	// ReadPage is how many events one read of a stream asks for; a long stream (the group
	// stream of a large group) is read in pages. It must not exceed the event store's MaxRead,
	// or a load stops after the first page. Default 500.
	ReadPage int `koanf:"read_page"`
}

// Defaults of LoaderConfig.
const (
	DefaultLoaderMaxEntries = 100_000
	DefaultLoaderShards     = 32
	DefaultLoaderReadPage   = 500
)

func (c *LoaderConfig) setDefaults() {
	if c.MaxEntries == 0 {
		c.MaxEntries = DefaultLoaderMaxEntries
	}
	if c.Shards == 0 {
		c.Shards = DefaultLoaderShards
	}
	if c.ReadPage == 0 {
		c.ReadPage = DefaultLoaderReadPage
	}
}

// Validate reports every invalid field of c at once.
func (c LoaderConfig) Validate() error {
	var errs []error
	if c.MaxEntries <= 0 {
		errs = append(errs, fmt.Errorf("MaxEntries must be positive, got %d", c.MaxEntries))
	}
	if c.Shards <= 0 || c.Shards > c.MaxEntries {
		errs = append(errs, fmt.Errorf("shards must be 1 to MaxEntries, got %d", c.Shards))
	}
	if c.ReadPage <= 0 {
		errs = append(errs, fmt.Errorf("ReadPage must be positive, got %d", c.ReadPage))
	}
	return errors.Join(errs...)
}
