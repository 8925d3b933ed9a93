package auth

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// MinSecretLen is the shortest accepted signing secret, in bytes (the HMAC-SHA256 block of
// entropy the key should carry).
const MinSecretLen = 32

// Key is one HMAC-SHA256 signing key.
type Key struct {
	// ID names the key inside every token it signs ("kid"): 1-32 of [A-Za-z0-9._-]. Never reuse
	// an id for a different secret.
	ID string `koanf:"id"`
	// Secret is the HMAC key: at least MinSecretLen bytes of random text, e.g. the output of
	// `openssl rand -base64 48`. Its bytes are used as they are. Never log it.
	Secret string `koanf:"secret"`
}

// Config configures a Signer.
//
// Rotation: add the new key to Keys, then switch SigningKeyID to it; keep the old key in Keys
// until the tokens it signed have expired (MaxTTL at most), then remove it.
type Config struct {
	// Keys are every key a token may be signed with. Required, ids unique.
	Keys []Key `koanf:"keys"`
	// SigningKeyID is the key Issue signs with. Default: the first key.
	SigningKeyID string `koanf:"signing_key_id"`
	// MaxTTL bounds the lifetime of every token: Issue refuses a longer ttl and Verify refuses a
	// token whose lifetime is longer or that expires later than MaxTTL from now. Default 30 days.
	MaxTTL time.Duration `koanf:"max_ttl"`
	// Leeway tolerates clock skew between nodes when checking expiry and issue time. Default 30 s.
	Leeway time.Duration `koanf:"leeway"`
	// Now is the clock. Default time.Now; tests set it.
	Now func() time.Time `koanf:"-"`
}

var keyIDRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,32}$`)

func (c *Config) setDefaults() {
	if c.SigningKeyID == "" && len(c.Keys) > 0 {
		c.SigningKeyID = c.Keys[0].ID
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = 30 * 24 * time.Hour
	}
	if c.Leeway == 0 {
		c.Leeway = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports every invalid field at once, with defaults applied. Secrets never appear in
// the errors.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if len(c.Keys) == 0 {
		errs = append(errs, errors.New("auth: at least one key is required"))
	}
	seen := make(map[string]bool, len(c.Keys))
	signing := false
	for i, k := range c.Keys {
		if !keyIDRe.MatchString(k.ID) {
			errs = append(errs, fmt.Errorf("auth: keys[%d].id %q: want 1-32 of [A-Za-z0-9._-]", i, k.ID))
		}
		if seen[k.ID] {
			errs = append(errs, fmt.Errorf("auth: keys[%d].id %q is duplicated", i, k.ID))
		}
		seen[k.ID] = true
		if len(k.Secret) < MinSecretLen {
			errs = append(errs, fmt.Errorf("auth: keys[%d] (%s): secret must be at least %d bytes", i, k.ID, MinSecretLen))
		}
		signing = signing || k.ID == c.SigningKeyID
	}
	if len(c.Keys) > 0 && !signing {
		errs = append(errs, fmt.Errorf("auth: signing_key_id %q names no configured key", c.SigningKeyID))
	}
	if c.MaxTTL <= 0 {
		errs = append(errs, errors.New("auth: max_ttl must be positive"))
	}
	if c.Leeway < 0 {
		errs = append(errs, errors.New("auth: leeway must not be negative"))
	}
	return errors.Join(errs...)
}
