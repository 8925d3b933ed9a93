package config

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/imledger/imledger/commands/verify"
	"github.com/imledger/imledger/transport/ratelimit"
)

// RateLimitConfig configures the per-tenant rate limits (transport/ratelimit): the node's
// per-minute limits, which a tenant's rate_limits setting overrides, and whether serve applies
// them at all.
type RateLimitConfig struct {
	// Config holds the node's limits: send_per_user, send_per_topic, rest_per_user,
	// rest_per_api_key, ws_connect_per_ip, group_create_per_user, friend_request_per_user and
	// key_prefix (empty: redis.key_prefix). 0 takes the package default, a negative value turns
	// the limit off.
	ratelimit.Config `koanf:",squash"`
	// Enabled makes serve apply the limits. Default true.
	Enabled bool `koanf:"enabled"`
}

// VerifyConfig configures verification codes (commands/verify) and their delivery.
type VerifyConfig struct {
	// HashKey is the HMAC key phone numbers, e-mail addresses and codes are hashed with, at least
	// 16 bytes; every node of a deployment must share it. Empty: serve refuses to start unless
	// Kafka is embedded (the local demo), where it generates a random key that lives as long as
	// the process. Never logged.
	HashKey string `koanf:"hash_key"`
	// CodeLength is the number of digits of a code, 4..10. Default 6.
	CodeLength int `koanf:"code_length"`
	// TTL is how long a code stays valid. Default 5m.
	TTL time.Duration `koanf:"ttl"`
	// ResendInterval is how long after a code another for the same scene and target is refused.
	// Default 1m.
	ResendInterval time.Duration `koanf:"resend_interval"`
	// MaxAttempts is how many wrong codes lock a code. Default 5.
	MaxAttempts int `koanf:"max_attempts"`
	// CreatePerHour is how many codes one tenant, scene and target may create per hour. Default 5.
	CreatePerHour int `koanf:"create_per_hour"`
	// GatewayURL is the SMS/e-mail gateway codes are POSTed to as JSON. Empty: codes are only
	// logged as sent (never the code itself), for the local demo.
	GatewayURL string `koanf:"gateway_url"`
	// GatewayToken is sent to the gateway as a bearer token when set. Never logged.
	GatewayToken string `koanf:"gateway_token"`
	// GatewayTimeout bounds one POST to the gateway. Default 5s.
	GatewayTimeout time.Duration `koanf:"gateway_timeout"`
}

// Service returns the configuration of verify.Service with key as the hash key and prefix as
// the Redis key prefix.
func (c VerifyConfig) Service(key []byte, prefix string) verify.Config {
	return verify.Config{HashKey: key, KeyPrefix: prefix, CodeLength: c.CodeLength, TTL: c.TTL,
		ResendInterval: c.ResendInterval, MaxAttempts: c.MaxAttempts, CreatePerHour: c.CreatePerHour}
}

// Validate checks the key length, the limits and the gateway URL.
func (c VerifyConfig) Validate() error {
	var errs []error
	if c.HashKey != "" && len(c.HashKey) < 16 {
		errs = append(errs, errors.New("verify.hash_key: at least 16 bytes"))
	}
	if err := c.Service([]byte("0123456789abcdef"), "im:").Validate(); err != nil {
		errs = append(errs, fmt.Errorf("verify: %w", err))
	}
	if c.GatewayURL != "" {
		if u, err := url.Parse(c.GatewayURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, errors.New("verify.gateway_url: want an http or https URL"))
		}
	}
	if c.GatewayTimeout < 0 {
		errs = append(errs, errors.New("verify.gateway_timeout: must not be negative"))
	}
	return errors.Join(errs...)
}
