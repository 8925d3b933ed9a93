package main

import (
	"context"
	"crypto/rand"
	"errors"

	"github.com/imledger/imledger/commands/actiontoken"
	"github.com/imledger/imledger/commands/verify"
	"github.com/imledger/imledger/readmodels/tokendb"
	"github.com/imledger/imledger/transport/ratelimit"
)

// shortState is the node's short-lived security state: rate limits, verification codes and
// action tokens. A nil field is off.
type shortState struct {
	limiter *ratelimit.Limiter
	// sender is the send handler with the send limits applied, for REST and WebSocket
	// (startCommands); the admin plane sends through the bare handler.
	sender  ratelimit.MessageSender
	codes   *verify.Service
	atokens *actiontoken.Service
}

// newLimiter builds the rate limiter from rate_limit with the tenant cache's overrides (when the
// node has one).
func (n *node) newLimiter() (*ratelimit.Limiter, error) {
	cfg := n.cfg.RateLimit.Config
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = n.cfg.Redis.KeyPrefix
	}
	var settings ratelimit.Settings
	if n.gate != nil {
		settings = n.gate
	}
	return ratelimit.New(n.rdb, cfg, settings, n.reg)
}

// startShortState builds the rate limiter (unless rate_limit.enabled is false), and, with MySQL,
// the verification codes and action tokens. Codes need verify.hash_key shared by every node;
// without it the key is generated per process when Kafka is embedded (the local demo), and serve
// refuses to start with Kafka brokers configured.
func (n *node) startShortState(_ context.Context) (err error) {
	if n.cfg.RateLimit.Enabled {
		if n.state.limiter, err = n.newLimiter(); err != nil {
			return err
		}
	}
	if n.router == nil {
		return nil
	}
	atcfg := n.cfg.ActionTokens
	if atcfg.KeyPrefix == "" {
		atcfg.KeyPrefix = n.cfg.Redis.KeyPrefix
	}
	if n.state.atokens, err = actiontoken.New(atcfg, actiontoken.Deps{Redis: n.rdb, Events: n.store, Rows: tokendb.New(n.router),
		Logger: n.log.With("component", "actiontoken")}); err != nil {
		return err
	}
	key := []byte(n.cfg.Verify.HashKey)
	if len(key) == 0 {
		if n.broker == nil {
			return errors.New("verify.hash_key: required when Kafka brokers are configured; every node must share the " +
				"same key of at least 16 bytes (IM_VERIFY_HASH_KEY)")
		}
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		n.log.Warn("no verify.hash_key configured: hashing phone numbers and codes with a random key that dies with this process, for trying imledger only")
	}
	var sender verify.Sender = &verify.LogSender{Logger: n.log.With("component", "verify")}
	if v := n.cfg.Verify; v.GatewayURL != "" {
		if sender, err = verify.NewHTTPSender(verify.HTTPSenderConfig{URL: v.GatewayURL, Token: v.GatewayToken, Timeout: v.GatewayTimeout}); err != nil {
			return err
		}
	}
	n.state.codes, err = verify.New(n.cfg.Verify.Service(key, n.cfg.Redis.KeyPrefix), n.rdb, n.router, sender)
	return err
}
