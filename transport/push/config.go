package push

import (
	"errors"
	"time"
)

// Defaults of Config.
const (
	DefaultConsumerGroup = "imledger.push.v1"
	DefaultWindow        = 3 * time.Second
	DefaultDedupTTL      = 10 * time.Minute
	DefaultQuietFor      = 24 * time.Hour
	DefaultQueueSize     = 1024
	DefaultLinger        = 100 * time.Millisecond
	DefaultConcurrency   = 64
	DefaultMaxPending    = 100000
	DefaultTimeout       = 5 * time.Second
	DefaultJPushURL      = "https://api.jpush.cn/v3/push"
	DefaultAlert         = "You have new messages"
)

// Config tunes the producer, the worker and the providers.
type Config struct {
	// ConsumerGroup is the worker's Kafka consumer group; never renamed once used. Default "imledger.push.v1".
	ConsumerGroup string `koanf:"consumer_group"`
	// KeyPrefix is put before the Redis keys (dedupe and quiet marks). Default "im:".
	KeyPrefix string `koanf:"key_prefix"`
	// Window is how long the worker gathers a user's tasks before it sends one reminder for
	// them. Default 3s.
	Window time.Duration `koanf:"window"`
	// DedupTTL is the life of a dedupe key im:{t}:push:dedup:{topic}:{seq}:{uid}: a task seen
	// again within it (a redelivery) sends nothing. Default 10m.
	DedupTTL time.Duration `koanf:"dedup_ttl"`
	// QuietFor is how long a conversation stays quiet for a user who got a reminder for it and
	// has not been online since: later messages produce no task for that user (mentions
	// excepted). Each reminder for the conversation extends it. Default 24h.
	QuietFor time.Duration `koanf:"quiet_for"`
	// QueueSize bounds the committed messages waiting for the producer; past it a message's
	// reminders are dropped and counted. Default 1024.
	QueueSize int `koanf:"queue_size"`
	// Linger is how long the producer gathers committed messages before it looks up the members
	// of their groups, all in one round trip: a quiet node then reads them once per Linger, not
	// once per message. Reminders wait Window for the worker anyway. Default 100ms; negative:
	// each commit is looked up at once.
	Linger time.Duration `koanf:"linger"`
	// Concurrency bounds the provider calls the worker makes at once for one tenant's reminders
	// of a window (tenants of a window are sent at the same time). Default 64.
	Concurrency int `koanf:"concurrency"`
	// MaxPending flushes the worker's window early once it holds this many tasks. Default 100000.
	MaxPending int `koanf:"max_pending"`
	// Retry is the provider retry schedule.
	Retry RetryConfig `koanf:"retry"`
	// JPush configures the JPush-compatible provider; it is on when app_key is set.
	JPush JPushConfig `koanf:"jpush"`
	// Webhook configures the generic webhook provider; it is on when url is set.
	Webhook WebhookConfig `koanf:"webhook"`
}

// RetryConfig is a retry schedule with exponential backoff.
type RetryConfig struct {
	// MaxAttempts counts the first try. Default 4.
	MaxAttempts int `koanf:"max_attempts"`
	// InitialInterval is the wait before the second try; each wait doubles. Default 200ms.
	InitialInterval time.Duration `koanf:"initial_interval"`
	// MaxInterval caps a wait. Default 5s.
	MaxInterval time.Duration `koanf:"max_interval"`
}

// JPushConfig configures the JPush-compatible provider (POST /v3/push, basic auth).
type JPushConfig struct {
	// URL is the push endpoint. Default https://api.jpush.cn/v3/push.
	URL string `koanf:"url"`
	// AppKey and MasterSecret authenticate; an empty AppKey turns the provider off.
	AppKey       string `koanf:"app_key"`
	MasterSecret string `koanf:"master_secret"`
	// Timeout bounds one HTTP call. Default 5s.
	Timeout time.Duration `koanf:"timeout"`
	// Alert is the notification text; never the message content. Default "You have new messages".
	Alert string `koanf:"alert"`
	// APNSProduction targets the production APNs environment.
	APNSProduction bool `koanf:"apns_production"`
}

// WebhookConfig configures the generic webhook provider (POST JSON).
type WebhookConfig struct {
	// URL receives one POST per reminder and device; empty turns the provider off.
	URL string `koanf:"url"`
	// Secret, when set, signs each body: header X-Imledger-Signature: sha256=<hex HMAC-SHA256>.
	Secret string `koanf:"secret"`
	// Timeout bounds one HTTP call. Default 5s.
	Timeout time.Duration `koanf:"timeout"`
}

func (c *Config) setDefaults() {
	if c.ConsumerGroup == "" {
		c.ConsumerGroup = DefaultConsumerGroup
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = "im:"
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.DedupTTL == 0 {
		c.DedupTTL = DefaultDedupTTL
	}
	if c.QuietFor == 0 {
		c.QuietFor = DefaultQuietFor
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.Retry.MaxAttempts == 0 {
		c.Retry.MaxAttempts = 4
	}
	if c.Retry.InitialInterval == 0 {
		c.Retry.InitialInterval = 200 * time.Millisecond
	}
	if c.Retry.MaxInterval == 0 {
		c.Retry.MaxInterval = 5 * time.Second
	}
	if c.JPush.URL == "" {
		c.JPush.URL = DefaultJPushURL
	}
	if c.JPush.Timeout == 0 {
		c.JPush.Timeout = DefaultTimeout
	}
	if c.JPush.Alert == "" {
		c.JPush.Alert = DefaultAlert
	}
	if c.Webhook.Timeout == 0 {
		c.Webhook.Timeout = DefaultTimeout
	}
}

// Validate reports every setting out of range.
func (c Config) Validate() error {
	var errs []error
	if c.Window < 0 || c.DedupTTL < 0 || c.QuietFor < 0 {
		errs = append(errs, errors.New("push: window, dedup_ttl and quiet_for must not be negative"))
	}
	if c.QueueSize < 0 || c.Concurrency < 0 || c.MaxPending < 0 || c.Retry.MaxAttempts < 0 {
		errs = append(errs, errors.New("push: queue_size, concurrency, max_pending and retry.max_attempts must not be negative"))
	}
	if c.JPush.AppKey != "" && c.JPush.MasterSecret == "" {
		errs = append(errs, errors.New("push.jpush.master_secret: required with app_key"))
	}
	if c.JPush.Timeout < 0 || c.Webhook.Timeout < 0 {
		errs = append(errs, errors.New("push: provider timeouts must not be negative"))
	}
	return errors.Join(errs...)
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.setDefaults()
	return c
}
