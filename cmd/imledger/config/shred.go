package config

import (
	"errors"

	"github.com/imledger/imledger/commands/shred"
)

// ShredConfig configures crypto-shredding (commands/shred, DESIGN §7a): the keeper that wraps
// the data keys and the keyring's cache.
type ShredConfig struct {
	// Enabled seals personal content in events (message content, profile fields, file names).
	// Default true. Off, new events carry plaintext; what was sealed still opens.
	Enabled bool `koanf:"enabled"`
	// KeeperURL is the gocloud.dev/secrets URL of the tenant key that wraps the data keys, e.g.
	// "awskms://alias/imledger?region=eu-west-1"; "{tenant}" in it gives each tenant its own key.
	// Empty: the local keeper with LocalKey. Never logged.
	KeeperURL Secret `koanf:"keeper_url"`
	// LocalKey is the 32-byte key, in base64, of the local keeper used when KeeperURL is empty;
	// every node must share it and it must be backed up: without it no data key unwraps. Empty
	// with KeeperURL empty: serve refuses to start unless Kafka is embedded (the local demo),
	// where it makes a key and keeps it in the event store (shred_local_key). Never logged.
	LocalKey Secret `koanf:"local_key"`
	// Config tunes the keyring: cache_ttl (1m; how long another node may still use a destroyed
	// key) and cache_entries (100,000).
	shred.Config `koanf:",squash"`
}

// Validate checks the local key's form and the keyring's settings.
func (c ShredConfig) Validate() error {
	var errs []error
	if c.LocalKey != "" {
		if _, err := shred.LocalKeeperURL(string(c.LocalKey)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
