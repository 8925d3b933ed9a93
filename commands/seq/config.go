package seq

import (
	"errors"
	"regexp"
	"strings"
	"time"
)

// Config configures an Allocator.
type Config struct {
	// KeyPrefix starts every key, default "im:". Keys are
	// <KeyPrefix><tenant>:topic:{<topic>}:last_seq and
	// <KeyPrefix><tenant>:topic:{<topic>}:uniq:msg:<from>:<client_msg_id>; the braces keep one
	// topic's keys in one Redis Cluster slot, which the Lua scripts need. Tests use a unique prefix.
	KeyPrefix string
	// PendingTTL bounds how long a claim stays pending when its sender dies before finishing,
	// default 60 s. An identical send meanwhile is answered "in progress".
	PendingTTL time.Duration
	// DoneTTL is how long a finished send is answered from Redis, default 24 h. After it the
	// event store's idempotency index answers.
	DoneTTL time.Duration
	// FailedTTL is how long a failed claim is remembered, default 5 min. A failed claim may be
	// taken again by the same client_msg_id at any time.
	FailedTTL time.Duration
	// NodeID names this node in the pending claims it takes and in its heartbeat key
	// <KeyPrefix>node:<NodeID>:alive: 1-64 of [A-Za-z0-9._-], unique among live nodes. Default: a
	// random id, so separate handlers never share one; a node sets its own (serve uses node_id).
	NodeID string
	// HeartbeatTTL is how long the heartbeat key of a node outlives its last refresh (refreshed
	// every third of it while the send handler runs). A retry finding a pending claim of a node
	// whose heartbeat expired, or of an earlier start of it, takes the claim over at once rather
	// than wait for PendingTTL. Default 3 s, at least 300 ms.
	HeartbeatTTL time.Duration
}

var nodeIDRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func (c *Config) setDefaults() {
	if c.KeyPrefix == "" {
		c.KeyPrefix = "im:"
	}
	if c.PendingTTL == 0 {
		c.PendingTTL = 60 * time.Second
	}
	if c.DoneTTL == 0 {
		c.DoneTTL = 24 * time.Hour
	}
	if c.FailedTTL == 0 {
		c.FailedTTL = 5 * time.Minute
	}
	if c.NodeID == "" {
		if id, err := randomID(); err == nil {
			c.NodeID = "node-" + id
		}
	}
	if c.HeartbeatTTL == 0 {
		c.HeartbeatTTL = 3 * time.Second
	}
}

// Validate reports every invalid field after defaults are applied.
func (c Config) Validate() error {
	var errs []error
	if strings.ContainsAny(c.KeyPrefix, "{} \t\r\n") {
		errs = append(errs, errors.New("seq: KeyPrefix must not contain braces or white space"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"PendingTTL", c.PendingTTL}, {"DoneTTL", c.DoneTTL}, {"FailedTTL", c.FailedTTL}} {
		if d.v < time.Millisecond {
			errs = append(errs, errors.New("seq: "+d.name+" must be at least 1ms"))
		}
	}
	if !nodeIDRe.MatchString(c.NodeID) {
		errs = append(errs, errors.New("seq: NodeID must be 1-64 of [A-Za-z0-9._-]"))
	}
	if c.HeartbeatTTL < 300*time.Millisecond {
		errs = append(errs, errors.New("seq: HeartbeatTTL must be at least 300ms"))
	}
	return errors.Join(errs...)
}
