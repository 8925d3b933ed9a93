package eventstore

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Config configures a Store. The zero value is usable: New fills in the defaults. The koanf tags
// name the keys of the event_store configuration section.
type Config struct {
	// MaxBatch is the largest number of events one Append or AppendBatch call may write; larger
	// calls fail with domain.ErrInvalid before touching the database. Default 1000.
	MaxBatch int `koanf:"max_batch"`
	// MaxRead caps the rows one ReadStream, ReadAll or ReadCommitted call returns. A limit that is
	// zero, negative or above MaxRead means MaxRead. Default 1000.
	MaxRead int `koanf:"max_read"`
	// NotifyChannel is the LISTEN/NOTIFY channel a committed append signals and Listen waits on.
	// It is a hint only: listeners must still read from their checkpoint. Default "im_events".
	NotifyChannel string `koanf:"notify_channel"`
	// ListenMinBackoff is the first pause before Listen reconnects after an error. Default 100ms.
	ListenMinBackoff time.Duration `koanf:"listen_min_backoff"`
	// ListenMaxBackoff caps the doubling reconnect pause of Listen. Default 5s.
	ListenMaxBackoff time.Duration `koanf:"listen_max_backoff"`
	// Logger receives the reconnect warnings of Listen. Default: discard.
	Logger *slog.Logger `koanf:"-"`
}

// Defaults of Config.
const (
	DefaultMaxBatch         = 1000
	DefaultMaxRead          = 1000
	DefaultNotifyChannel    = "im_events"
	DefaultListenMinBackoff = 100 * time.Millisecond
	DefaultListenMaxBackoff = 5 * time.Second
)

// maxIdentifierLen is PostgreSQL's NAMEDATALEN-1, the longest channel name.
const maxIdentifierLen = 63

func (c *Config) setDefaults() {
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxRead == 0 {
		c.MaxRead = DefaultMaxRead
	}
	if c.NotifyChannel == "" {
		c.NotifyChannel = DefaultNotifyChannel
	}
	if c.ListenMinBackoff == 0 {
		c.ListenMinBackoff = DefaultListenMinBackoff
	}
	if c.ListenMaxBackoff == 0 {
		c.ListenMaxBackoff = DefaultListenMaxBackoff
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every invalid field of c at once.
func (c Config) Validate() error {
	var errs []error
	if c.MaxBatch <= 0 {
		errs = append(errs, fmt.Errorf("MaxBatch must be positive, got %d", c.MaxBatch))
	}
	if c.MaxRead <= 0 {
		errs = append(errs, fmt.Errorf("MaxRead must be positive, got %d", c.MaxRead))
	}
	if c.NotifyChannel == "" || len(c.NotifyChannel) > maxIdentifierLen {
		errs = append(errs, fmt.Errorf("NotifyChannel must be 1 to %d bytes, got %q", maxIdentifierLen, c.NotifyChannel))
	}
	if c.ListenMinBackoff <= 0 {
		errs = append(errs, fmt.Errorf("ListenMinBackoff must be positive, got %s", c.ListenMinBackoff))
	}
	if c.ListenMaxBackoff < c.ListenMinBackoff {
		errs = append(errs, fmt.Errorf("ListenMaxBackoff (%s) must not be below ListenMinBackoff (%s)", c.ListenMaxBackoff, c.ListenMinBackoff))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("a Logger is required"))
	}
	return errors.Join(errs...)
}

// limit turns a caller's row limit into the one a query uses.
func (c Config) limit(n int) int {
	if n <= 0 || n > c.MaxRead {
		return c.MaxRead
	}
	return n
}
