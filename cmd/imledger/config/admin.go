package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/imledger/imledger/commands/admin"
	"github.com/imledger/imledger/domain/admintrust"
)

// AdminConfig configures the admin command consumer of serve, and how the tools (admin send,
// deadletter replay --admin, bench admin) sign and seal the commands they send: the admin
// package's settings, the keys, and whether this node runs the consumer.
type AdminConfig struct {
	// Config holds the consumer settings: consumer_group, allowed_sources, retry.*,
	// claim_timeout, command_timeout, close_timeout, max_batch, concurrency, replay_window,
	// clock_leeway.
	admin.Config `koanf:",squash"`
	// Run makes serve consume im.admin.command. Nodes share the consumer group, so any number
	// may run it. Default true.
	Run bool `koanf:"run"`
	// ProducerKeys are the keys admin commands are verified with, one key spec each
	// (admintrust): "id=<id>;scope=<*|tenant>;actor=<admin|system>/<id>;ed25519=<public key>"
	// or "...;hmac-sha256=<secret>". `imledger admin keygen` prints them. In the environment:
	// comma-separated. Default empty: every command is refused, unless unsigned ones are allowed.
	// Never logged.
	ProducerKeys SecretList `koanf:"producer_keys"`
	// CommandSecretKeys are the node's command-secrets keys, "id=<id>;x25519=<private key>"
	// each: sealed secret fields (a password) are opened with them. Two at once for a rotation;
	// producers seal to the first. `imledger admin keygen --secrets` prints one. Default empty:
	// commands with secret fields are refused. Never logged.
	CommandSecretKeys SecretList `koanf:"command_secret_keys"`
	// AllowUnsigned accepts unsigned admin commands (their envelope's actor taken at its word)
	// and plain-text secret fields, with a warning at start. Only with the embedded broker: with
	// kafka.brokers set it is ignored and they are always refused. Default true.
	AllowUnsigned bool `koanf:"allow_unsigned"`
	// SigningKey is the key the tools sign the commands they send with, "id=<id>;actor=<admin|
	// system>/<id>;ed25519=<private key>" (or hmac-sha256=<secret>); its public half is in the
	// nodes' producer_keys. Required with kafka.brokers. Default empty. Never logged.
	SigningKey Secret `koanf:"signing_key"`
	// SealKey is the nodes' public command-secrets key the tools seal secret fields to,
	// "id=<id>;x25519=<public key>". Default: the public half of the first command_secret_keys.
	SealKey string `koanf:"seal_key"`
}

// SecretList is a list of key specs that may hold secrets. As a string (an environment variable)
// it is the specs separated by commas; in YAML, a list of strings. It never prints its items.
type SecretList []string

// String counts the items, never shows them.
func (l SecretList) String() string { return fmt.Sprintf("[%d keys]", len(l)) }

// GoString counts the items, never shows them.
func (l SecretList) GoString() string { return l.String() }

// Secret is a configuration string that may hold a secret; it never prints itself.
type Secret string

// String says whether it is set, never what it is.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[set]"
}

// GoString says whether it is set, never what it is.
func (s Secret) GoString() string { return s.String() }

var secretListType = reflect.TypeFor[SecretList]()

// secretListHook decodes a string into a SecretList: items separated by commas, blanks dropped
// (mapstructure decode hook).
func secretListHook(from, to reflect.Type, data any) (any, error) {
	if to != secretListType || from.Kind() != reflect.String {
		return data, nil
	}
	var out SecretList
	for _, s := range strings.Split(reflect.ValueOf(data).String(), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// producerKeys parses admin.producer_keys.
func (c AdminConfig) producerKeys() ([]admintrust.ProducerKey, error) {
	var (
		out  []admintrust.ProducerKey
		errs []error
	)
	for i, spec := range c.ProducerKeys {
		k, err := admintrust.ParseProducerKey(spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("admin.producer_keys: key %d: %w", i+1, err))
			continue
		}
		out = append(out, k)
	}
	return out, errors.Join(errs...)
}

// secretKeys parses admin.command_secret_keys.
func (c AdminConfig) secretKeys() ([]admintrust.OpenKey, error) {
	var (
		out  []admintrust.OpenKey
		errs []error
	)
	for i, spec := range c.CommandSecretKeys {
		k, err := admintrust.ParseOpenKey(spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("admin.command_secret_keys: key %d: %w", i+1, err))
			continue
		}
		out = append(out, k)
	}
	return out, errors.Join(errs...)
}

// validateTrust checks every key spec. Errors name the key and the field, never key material.
func (c AdminConfig) validateTrust() error {
	var errs []error
	pk, err := c.producerKeys()
	errs = append(errs, err)
	if err == nil {
		if _, err := admintrust.NewVerifier(1, 0, pk...); err != nil {
			errs = append(errs, fmt.Errorf("admin.producer_keys: %w", err))
		}
	}
	sk, err := c.secretKeys()
	errs = append(errs, err)
	if err == nil {
		if _, err := admintrust.NewOpener(sk...); err != nil {
			errs = append(errs, fmt.Errorf("admin.command_secret_keys: %w", err))
		}
	}
	if c.SigningKey != "" {
		if _, err := admintrust.ParseSigner(string(c.SigningKey)); err != nil {
			errs = append(errs, fmt.Errorf("admin.signing_key: %w", err))
		}
	}
	if c.SealKey != "" {
		if _, err := admintrust.ParseSealKey(c.SealKey); err != nil {
			errs = append(errs, fmt.Errorf("admin.seal_key: %w", err))
		}
	}
	return errors.Join(errs...)
}

// AdminConsumer is the admin section as the consumer takes it: the keys parsed, and unsigned
// commands allowed only with the embedded broker and admin.allow_unsigned. The topics are left
// to the caller. Call it on a validated configuration.
func (c Config) AdminConsumer() (admin.Config, error) {
	a := c.Admin.Config
	var err1, err2 error
	a.ProducerKeys, err1 = c.Admin.producerKeys()
	a.SecretKeys, err2 = c.Admin.secretKeys()
	a.AllowUnsigned = c.Admin.AllowUnsigned && c.Kafka.UseEmbedded()
	return a, errors.Join(err1, err2)
}

// AdminSigner is the tools' signing key: override when not empty (a flag), else
// admin.signing_key; nil when neither is set.
func (c Config) AdminSigner(override string) (*admintrust.Signer, error) {
	spec := string(c.Admin.SigningKey)
	if override != "" {
		spec = override
	}
	if spec == "" {
		return nil, nil
	}
	s, err := admintrust.ParseSigner(spec)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	return s, nil
}

// AdminSealKey is the key the tools seal secret fields to: override when not empty (a flag),
// else admin.seal_key, else the public half of the first admin.command_secret_keys; nil when
// there is none.
func (c Config) AdminSealKey(override string) (*admintrust.SealKey, error) {
	spec := c.Admin.SealKey
	if override != "" {
		spec = override
	}
	if spec != "" {
		k, err := admintrust.ParseSealKey(spec)
		if err != nil {
			return nil, fmt.Errorf("seal key: %w", err)
		}
		return &k, nil
	}
	keys, err := c.Admin.secretKeys()
	if err != nil || len(keys) == 0 {
		return nil, err
	}
	k := keys[0].SealKey()
	return &k, nil
}
