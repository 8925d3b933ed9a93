package presence

import (
	"errors"
	"regexp"
	"strings"
	"time"
)

// Config configures a Store.
type Config struct {
	// KeyPrefix starts every key, default "im:". Keys are <KeyPrefix><tenant>:presence:... and
	// <KeyPrefix><tenant>:topic:{<topic>}:...; see Store. Tests use a unique prefix.
	KeyPrefix string `koanf:"key_prefix"`
	// NodeID names this node in presence entries and per-node sets: 1-64 of [A-Za-z0-9._-].
	// Required; it must be unique among live nodes.
	NodeID string `koanf:"node_id"`
	// TTL is how long a session and its topic memberships stay online without a heartbeat.
	// Default 90 s; seed 000 recommends 60-120 s. A crashed node's users are offline after it.
	TTL time.Duration `koanf:"ttl"`
	// TouchInterval is the least time between two refreshes of one session, however many frames
	// it sends. Default TTL/3; it must be below TTL.
	TouchInterval time.Duration `koanf:"touch_interval"`
	// LastSeenTTL is how long a user's presence hash (with last_seen_at) is kept after the user's
	// last activity. Default 30 days.
	LastSeenTTL time.Duration `koanf:"last_seen_ttl"`
}

var nodeIDRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func (c *Config) setDefaults() {
	if c.KeyPrefix == "" {
		c.KeyPrefix = "im:"
	}
	if c.TTL == 0 {
		c.TTL = 90 * time.Second
	}
	if c.TouchInterval == 0 {
		c.TouchInterval = c.TTL / 3
	}
	if c.LastSeenTTL == 0 {
		c.LastSeenTTL = 30 * 24 * time.Hour
	}
}

// Validate reports every invalid field at once, with defaults applied.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if strings.ContainsAny(c.KeyPrefix, "{} \t\r\n") {
		errs = append(errs, errors.New("presence: key_prefix must not contain braces or white space"))
	}
	if !nodeIDRe.MatchString(c.NodeID) {
		errs = append(errs, errors.New("presence: node_id is required: 1-64 of [A-Za-z0-9._-]"))
	}
	if c.TTL < time.Second {
		errs = append(errs, errors.New("presence: ttl must be at least 1s"))
	}
	if c.TouchInterval <= 0 || c.TouchInterval >= c.TTL {
		errs = append(errs, errors.New("presence: touch_interval must be positive and below ttl"))
	}
	if c.LastSeenTTL < c.TTL {
		errs = append(errs, errors.New("presence: last_seen_ttl must be at least ttl"))
	}
	return errors.Join(errs...)
}
