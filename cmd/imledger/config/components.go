package config

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/session"
	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/presence"
	"github.com/imledger/imledger/transport/userchan"
	"github.com/imledger/imledger/transport/ws"
)

// ProjectionsConfig configures the projectors of serve: the projections package's settings and
// whether this node runs them at all.
type ProjectionsConfig struct {
	// Config holds the projector settings: initial_offset, retry.*, batch.*, parking.*,
	// in_flight, fetch_linger, channel_buffer_size, nack_resend_sleep,
	// lag_interval, close_timeout.
	projections.Config `koanf:",squash"`
	// Run makes serve run the projectors (messages-mysql, messages-hot). Nodes of one deployment
	// share their consumer groups, so any number may run them. Default true; ignored when MySQL
	// is off.
	Run bool `koanf:"run"`
}

// DemoConfig configures the demo set-up of serve.
type DemoConfig struct {
	// Tenant is provisioned at start-up (its MySQL database) so the chat page works at once.
	// Default "demo"; empty provisions nothing.
	Tenant string `koanf:"tenant"`
}

// Validate checks the tenant id.
func (c DemoConfig) Validate() error {
	if c.Tenant == "" {
		return nil
	}
	if _, err := domain.NewTenantID(c.Tenant); err != nil {
		return fmt.Errorf("demo.tenant %q: %w", c.Tenant, err)
	}
	return nil
}

// validateComponents checks the component sections whose packages validate with their defaults
// applied, as serve resolves them, and refuses keys that other sections own.
func (c Config) validateComponents() error {
	errs := []error{c.Auth.Validate(), c.Account.Validate(), c.MessageOps.Validate(), c.Demo.Validate(),
		c.Tenants.Validate(), c.Admin.Config.Validate(), c.Admin.validateTrust(), c.RateLimit.Config.Validate(), c.Verify.Validate(), c.Shred.Validate(),
		c.ActionTokens.Validate()}
	if err := c.WSConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Presence.NodeID != "" {
		errs = append(errs, errors.New("presence.node_id: not a key; presence uses node_id"))
	} else if err := c.PresenceConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.ChannelConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Fanout.NodeID != "" {
		errs = append(errs, errors.New("fanout.node_id: not a key; fanout uses node_id"))
	} else if err := c.FanoutConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Send.Seq.NodeID != "" {
		errs = append(errs, errors.New("send.seq.node_id: not a key; the send handler uses node_id"))
	}
	if c.Sessions.Node != "" {
		errs = append(errs, errors.New("sessions.node: not a key; sessions uses node_id"))
	} else if err := c.SessionsConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	if !reflect.ValueOf(c.Projections.Kafka).IsZero() {
		errs = append(errs, errors.New("projections.kafka: not a key; the projectors use the kafka section"))
	} else {
		// The kafka section is checked on its own; a valid stand-in keeps its errors from
		// being reported twice.
		p := c.Projections.Config
		p.Kafka = tkafka.Config{Brokers: []string{"localhost:9092"}}
		if err := p.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("projections: %w", err))
		}
	}
	return errors.Join(errs...)
}

// prefix returns own, or redis.key_prefix when own is empty.
func (c Config) prefix(own string) string {
	if own != "" {
		return own
	}
	return c.Redis.KeyPrefix
}

// SendConfig is the send section with node_id and the Redis key prefix resolved.
func (c Config) SendConfig() message.SendMessageConfig {
	s := c.Send
	s.Seq.KeyPrefix = c.prefix(s.Seq.KeyPrefix)
	s.Seq.NodeID = c.NodeID
	return s
}

// ChannelConfig is the channel section with the key prefix resolved.
func (c Config) ChannelConfig() userchan.Config {
	ch := c.Channel
	ch.KeyPrefix = c.prefix(ch.KeyPrefix)
	return ch
}

// PresenceConfig is the presence section with node_id and the key prefix resolved.
func (c Config) PresenceConfig() presence.Config {
	p := c.Presence
	p.NodeID = c.NodeID
	p.KeyPrefix = c.prefix(p.KeyPrefix)
	return p
}

// FanoutConfig is the fanout section with node_id and the key prefix resolved.
func (c Config) FanoutConfig() fanout.Config {
	f := c.Fanout
	f.NodeID = c.NodeID
	f.KeyPrefix = c.prefix(f.KeyPrefix)
	return f
}

// SessionsConfig is the sessions section with node_id resolved.
func (c Config) SessionsConfig() session.RecorderConfig {
	s := c.Sessions
	s.Node = c.NodeID
	return s
}

// WSConfig is the ws section with the content limit resolved.
func (c Config) WSConfig() ws.Config {
	w := c.WS
	if w.MaxContentBytes == 0 {
		w.MaxContentBytes = c.Send.MaxContentBytes
	}
	return w
}

// HotConfig is the hot section with the key prefix resolved.
func (c Config) HotConfig() hot.Config {
	h := c.Hot
	h.Prefix = c.prefix(h.Prefix)
	return h
}

// BusinessConfig is the business section with the key prefix resolved.
func (c Config) BusinessConfig() business.Config {
	b := c.Business
	b.KeyPrefix = c.prefix(b.KeyPrefix)
	return b
}

// ProjectorConfig is the projections section with the kafka section's client settings. With the
// embedded broker, call it after start-up filled in kafka.brokers.
func (c Config) ProjectorConfig() projections.Config {
	p := c.Projections.Config
	p.Kafka = c.Kafka.Config
	return p
}

// InvalidationChannel is the Redis Pub/Sub channel on which nodes tell each other which cached
// send-policy states a command changed.
func (c Config) InvalidationChannel() string { return c.Redis.KeyPrefix + "cache:invalidate" }

// RateLimitPrefix starts the Redis keys of the login and register rate limits.
func (c Config) RateLimitPrefix() string { return c.Redis.KeyPrefix + "rl:" }

// DemoTenant is the tenant serve provisions at start-up; zero when none.
func (c Config) DemoTenant() domain.TenantID {
	t, _ := domain.NewTenantID(c.Demo.Tenant)
	return t
}
