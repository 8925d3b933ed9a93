package userchan

import (
	"errors"
	"strings"
	"time"
)

// Config configures a Log and a Channel.
type Config struct {
	// KeyPrefix starts every key, default "im:"; the keys are <KeyPrefix><tenant>:uchan:{<uid>}:...
	// and share the user's Redis Cluster slot with the user's presence keys.
	KeyPrefix string `koanf:"key_prefix"`
	// LogSize is how many items of a user's channel are kept: a client that reconnects after
	// more items than that is told to resync. Default 1000.
	LogSize int `koanf:"log_size"`
	// LogTTL is how long a user's channel log is kept after its last item: a client that
	// reconnects later is told to resync. Default 7 days.
	LogTTL time.Duration `koanf:"log_ttl"`
	// QueueSize bounds the items waiting to be logged off the send path (a new 1:1
	// conversation's item, queued at the commit of its first message so the sequencer never
	// waits for it); an item finding it full is dropped and counted. Default 4096.
	QueueSize int `koanf:"queue_size"`
	// PublishTimeout bounds the Redis work of logging and delivering one change's items.
	// Default 2 s.
	PublishTimeout time.Duration `koanf:"publish_timeout"`
}

func (c *Config) setDefaults() {
	if c.KeyPrefix == "" {
		c.KeyPrefix = "im:"
	}
	if c.LogSize == 0 {
		c.LogSize = 1000
	}
	if c.LogTTL == 0 {
		c.LogTTL = 7 * 24 * time.Hour
	}
	if c.QueueSize == 0 {
		c.QueueSize = 4096
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = 2 * time.Second
	}
}

// Validate reports every invalid field at once, with defaults applied.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if strings.ContainsAny(c.KeyPrefix, "{} \t\r\n") {
		errs = append(errs, errors.New("userchan: key_prefix must not contain braces or white space"))
	}
	if c.LogSize < 1 || c.LogSize > 100_000 {
		errs = append(errs, errors.New("userchan: log_size must be 1 to 100000"))
	}
	if c.LogTTL < time.Minute {
		errs = append(errs, errors.New("userchan: log_ttl must be at least 1m"))
	}
	if c.QueueSize < 1 {
		errs = append(errs, errors.New("userchan: queue_size must be positive"))
	}
	if c.PublishTimeout <= 0 {
		errs = append(errs, errors.New("userchan: publish_timeout must be positive"))
	}
	return errors.Join(errs...)
}
