package account

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/imledger/imledger/commands/account/passhash"
)

// Config configures a Service.
type Config struct {
	// Password is the argon2id cost of new hashes. A stored hash made with other parameters is
	// rehashed at the next successful login. Default passhash.DefaultParams. New fails on
	// parameters passhash.Hash rejects.
	Password passhash.Params
	// HashConcurrency bounds the password hashes and verifications that run at once. Each takes
	// Password.Memory of RAM and keeps Password.Threads cores busy, so a burst of logins queues
	// instead of exhausting the node's memory. Default runtime.GOMAXPROCS.
	HashConcurrency int
	// HashWait is how long a registration or login waits for its turn to hash before it is
	// refused as retryable. Default 10 s.
	HashWait time.Duration
	// MinPasswordLen is the shortest password Register accepts, in bytes. Default 8.
	MinPasswordLen int
	// PendingTimeout is how long a registration may hold a login name before its event is
	// committed. An unconfirmed claim older than this is taken to be abandoned (the process died
	// between the two writes) and the name is free again. Keep it well above the longest request
	// time. Default 2 minutes.
	PendingTimeout time.Duration
	// MaxIDDraws bounds how often Register draws a new user id when the drawn one is taken.
	// Default 5.
	MaxIDDraws int
	// APIKeyCacheTTL is how long a verified API key is trusted without asking PostgreSQL again;
	// a revocation takes up to this long to reach other nodes. Default 30 s; negative disables
	// the cache.
	APIKeyCacheTTL time.Duration
}

func (c *Config) setDefaults() {
	if c.Password == (passhash.Params{}) {
		c.Password = passhash.DefaultParams
	}
	if c.HashConcurrency == 0 {
		c.HashConcurrency = runtime.GOMAXPROCS(0)
	}
	if c.HashWait == 0 {
		c.HashWait = 10 * time.Second
	}
	if c.MinPasswordLen == 0 {
		c.MinPasswordLen = 8
	}
	if c.PendingTimeout == 0 {
		c.PendingTimeout = 2 * time.Minute
	}
	if c.MaxIDDraws == 0 {
		c.MaxIDDraws = 5
	}
	if c.APIKeyCacheTTL == 0 {
		c.APIKeyCacheTTL = 30 * time.Second
	}
}

// Validate reports every problem of c, with defaults applied, joined into one error.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if c.MinPasswordLen < 1 || c.MinPasswordLen > passhash.MaxPasswordLen {
		errs = append(errs, fmt.Errorf("account: min_password_len must be 1 to %d", passhash.MaxPasswordLen))
	}
	if c.HashConcurrency < 1 {
		errs = append(errs, errors.New("account: hash_concurrency must be at least 1"))
	}
	if c.HashWait < 0 {
		errs = append(errs, errors.New("account: hash_wait must not be negative"))
	}
	if c.PendingTimeout < 0 {
		errs = append(errs, errors.New("account: pending_timeout must not be negative"))
	}
	if c.MaxIDDraws < 1 {
		errs = append(errs, errors.New("account: max_id_draws must be at least 1"))
	}
	return errors.Join(errs...)
}
