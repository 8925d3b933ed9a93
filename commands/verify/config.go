package verify

import (
	"errors"
	"time"
)

// Config configures a Service.
type Config struct {
	// HashKey is the HMAC-SHA-256 key of phone and e-mail hashes and of code MACs, at least 16
	// bytes. Changing it orphans the active codes and the audit rows' link to their targets.
	// Required.
	HashKey []byte
	// KeyPrefix starts every Redis key: <KeyPrefix><tenant>:vcode:{<scene>:<hash>}:…. Default "im:".
	KeyPrefix string
	// CodeLength is the number of digits of a code, 4..10. Default 6.
	CodeLength int
	// TTL is how long a code stays valid. Default 5 minutes.
	TTL time.Duration
	// ResendInterval is how long after a creation a new code for the same scene and target is
	// refused (429 rate_limited, limit code_resend). Default 60 s.
	ResendInterval time.Duration
	// MaxAttempts is how many wrong codes lock the active code (it dies; a new one must be
	// created). Default 5.
	MaxAttempts int
	// CreatePerHour is how many codes one tenant, scene and target may create per hour
	// (Redis INCR + EXPIRE). Default 5.
	CreatePerHour int
}

func (c *Config) setDefaults() {
	if c.KeyPrefix == "" {
		c.KeyPrefix = "im:"
	}
	if c.CodeLength == 0 {
		c.CodeLength = 6
	}
	if c.TTL == 0 {
		c.TTL = 5 * time.Minute
	}
	if c.ResendInterval == 0 {
		c.ResendInterval = time.Minute
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
	if c.CreatePerHour == 0 {
		c.CreatePerHour = 5
	}
}

// Validate reports every problem of c, with defaults applied, joined into one error.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if len(c.HashKey) < 16 {
		errs = append(errs, errors.New("verify: HashKey must be at least 16 bytes"))
	}
	if c.CodeLength < 4 || c.CodeLength > 10 {
		errs = append(errs, errors.New("verify: CodeLength must be 4..10"))
	}
	if c.TTL < time.Second || c.ResendInterval < 0 || c.ResendInterval > c.TTL {
		errs = append(errs, errors.New("verify: TTL must be at least 1s and ResendInterval within 0..TTL"))
	}
	if c.MaxAttempts < 1 || c.CreatePerHour < 1 {
		errs = append(errs, errors.New("verify: MaxAttempts and CreatePerHour must be at least 1"))
	}
	return errors.Join(errs...)
}
