package fanout

import (
	"errors"
	"regexp"
	"strings"
	"time"
)

// Config configures a Fanout.
type Config struct {
	// KeyPrefix starts the channel names, default "im:". This node listens on
	// <KeyPrefix>node:<NodeID>:fanout.
	KeyPrefix string `koanf:"key_prefix"`
	// NodeID names this node; the same id presence records members under. Required.
	NodeID string `koanf:"node_id"`
	// Workers publish to other nodes. A topic always goes through the same worker, so one
	// topic's messages leave this node in the order Publish was called. Default 4.
	Workers int `koanf:"workers"`
	// QueueSize is each worker's queue length. Publish never waits: a message that finds its
	// worker's queue full is not sent to other nodes (counted as dropped). Default 8192.
	QueueSize int `koanf:"queue_size"`
	// MaxBatch is the most messages a worker sends in one Redis round trip. Default 128.
	MaxBatch int `koanf:"max_batch"`
	// PublishTimeout bounds one batch's Redis work. Default 2 s.
	PublishTimeout time.Duration `koanf:"publish_timeout"`
	// ReceiveBuffer is the number of received messages buffered before local delivery.
	// Default 8192.
	ReceiveBuffer int `koanf:"receive_buffer"`
}

var nodeIDRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func (c *Config) setDefaults() {
	if c.KeyPrefix == "" {
		c.KeyPrefix = "im:"
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.QueueSize == 0 {
		c.QueueSize = 8192
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 128
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = 2 * time.Second
	}
	if c.ReceiveBuffer == 0 {
		c.ReceiveBuffer = 8192
	}
}

// Validate reports every invalid field at once, with defaults applied.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if strings.ContainsAny(c.KeyPrefix, " \t\r\n") {
		errs = append(errs, errors.New("fanout: key_prefix must not contain white space"))
	}
	if !nodeIDRe.MatchString(c.NodeID) {
		errs = append(errs, errors.New("fanout: node_id is required: 1-64 of [A-Za-z0-9._-]"))
	}
	if c.Workers <= 0 || c.QueueSize <= 0 || c.MaxBatch <= 0 || c.ReceiveBuffer <= 0 {
		errs = append(errs, errors.New("fanout: workers, queue_size, max_batch and receive_buffer must be positive"))
	}
	if c.PublishTimeout <= 0 {
		errs = append(errs, errors.New("fanout: publish_timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Channel returns the Pub/Sub channel node listens on.
func Channel(keyPrefix, node string) string { return keyPrefix + "node:" + node + ":fanout" }

// BroadcastChannel returns the Pub/Sub channel every node listens on for KindAccount messages.
func BroadcastChannel(keyPrefix string) string { return keyPrefix + "fanout:all" }
