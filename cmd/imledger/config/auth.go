package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/imledger/imledger/transport/auth"
)

// AuthConfig configures the access tokens: the HMAC keys every node verifies with (all nodes of
// a deployment must share them), the key new tokens are signed with, and token lifetimes.
type AuthConfig struct {
	// Keys are the signing keys, each {id, secret}; the secret is at least 32 bytes of random
	// text. In the environment: IM_AUTH_KEYS=k1=<secret>,k2=<secret> (secrets without commas).
	// Empty: serve refuses to start unless Kafka is embedded (the local demo), where it generates
	// a random key that lives as long as the process. Never logged.
	Keys KeyList `koanf:"keys"`
	// SigningKeyID is the key new tokens are signed with. Default: the first key. Rotate by
	// adding a key, switching this to it, and removing the old key after max_ttl.
	SigningKeyID string `koanf:"signing_key_id"`
	// TokenTTL is the lifetime of the tokens login issues, and the default of `token issue`.
	// Default 24h.
	TokenTTL time.Duration `koanf:"token_ttl"`
	// MaxTTL bounds the lifetime of any token issued. Default 720h (30 days).
	MaxTTL time.Duration `koanf:"max_ttl"`
	// Leeway tolerates clock skew between nodes when checking expiry. Default 30s.
	Leeway time.Duration `koanf:"leeway"`
}

// Signer returns the configuration of transport/auth's Signer.
func (c AuthConfig) Signer() auth.Config {
	return auth.Config{Keys: []auth.Key(c.Keys), SigningKeyID: c.SigningKeyID, MaxTTL: c.MaxTTL, Leeway: c.Leeway}
}

// Validate checks the lifetimes and, when keys are given, the keys. Errors name key ids, never
// secrets.
func (c AuthConfig) Validate() error {
	var errs []error
	if c.TokenTTL <= 0 {
		errs = append(errs, errors.New("auth.token_ttl: must be positive"))
	}
	if c.MaxTTL > 0 && c.TokenTTL > c.MaxTTL {
		errs = append(errs, errors.New("auth.token_ttl: must not exceed auth.max_ttl"))
	}
	if len(c.Keys) > 0 {
		if err := c.Signer().Validate(); err != nil {
			errs = append(errs, err)
		}
	} else if c.SigningKeyID != "" {
		errs = append(errs, errors.New("auth.signing_key_id: set, but auth.keys is empty"))
	}
	if c.MaxTTL < 0 || c.Leeway < 0 {
		errs = append(errs, errors.New("auth.max_ttl and auth.leeway: must not be negative"))
	}
	return errors.Join(errs...)
}

// KeyList is a list of signing keys. In YAML it is a list of {id, secret} objects; as a string
// (an environment variable) it is "id=secret" pairs separated by commas.
type KeyList []auth.Key

// String lists the key ids only, so a KeyList never prints a secret.
func (l KeyList) String() string {
	ids := make([]string, len(l))
	for i, k := range l {
		ids[i] = k.ID
	}
	return "[" + strings.Join(ids, ",") + "]"
}

// ParseKeyList parses "id=secret,id=secret". An empty string is an empty list. Errors name the
// position of the bad pair, never its text.
func ParseKeyList(s string) (KeyList, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out KeyList
	for i, pair := range strings.Split(s, ",") {
		id, secret, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || id == "" || secret == "" {
			return nil, fmt.Errorf("auth.keys: pair %d: want id=secret", i+1)
		}
		out = append(out, auth.Key{ID: id, Secret: secret})
	}
	return out, nil
}

var keyListType = reflect.TypeFor[KeyList]()

// keyListHook decodes a string into a KeyList (mapstructure decode hook).
func keyListHook(from, to reflect.Type, data any) (any, error) {
	if to != keyListType || from.Kind() != reflect.String {
		return data, nil
	}
	return ParseKeyList(reflect.ValueOf(data).String())
}
