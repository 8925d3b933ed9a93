package admintrust

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/imledger/imledger/domain"
)

// A key spec is the text form of a key, one line for a configuration file or an environment
// variable: name=value pairs separated by ';', keys in standard base64. For example
//
//	id=ops-2026;scope=*;actor=admin/ops-7;ed25519=<public key>   a producer key (ParseProducerKey)
//	id=ops-2026;actor=admin/ops-7;ed25519=<private key>          its signer (ParseSigner)
//	id=cs-2026;x25519=<private key>                              a command-secrets key (ParseOpenKey)
//	id=cs-2026;x25519=<public key>                               its seal key (ParseSealKey)
//
// hmac-sha256=<secret> takes the place of ed25519 for an HMAC key. Parse errors name the key id
// and the field, never a value of a key.
const (
	specID     = "id"
	specScope  = "scope"
	specActor  = "actor"
	specEd     = "ed25519"
	specHMAC   = "hmac-sha256"
	specX25519 = "x25519"
)

// parseSpec splits spec into its fields; every field must be one of allowed, once.
func parseSpec(spec string, allowed ...string) (map[string]string, error) {
	out := map[string]string{}
	for i, part := range strings.Split(strings.TrimSpace(spec), ";") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("part %d: want name=value", i+1)
		}
		known := false
		for _, a := range allowed {
			known = known || a == name
		}
		if !known {
			return nil, fmt.Errorf("part %d: %q is not one of %s", i+1, name, strings.Join(allowed, ", "))
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s given twice", name)
		}
		out[name] = strings.TrimSpace(value)
	}
	if out[specID] == "" {
		return nil, fmt.Errorf("id is required")
	}
	return out, nil
}

// decodeKey reads standard base64 (padding optional).
func decodeKey(id, field, v string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(v)
	}
	if err != nil || len(b) == 0 {
		return nil, fmt.Errorf("key %s: %s: not standard base64", id, field)
	}
	return b, nil
}

// ParseActor reads the identity of a key: "admin/<id>", "system/<id>", or "<id>" for an
// administrator.
func ParseActor(s string) (domain.Actor, error) {
	typ, id, ok := strings.Cut(s, "/")
	if !ok {
		typ, id = domain.ActorAdmin, s
	}
	a := domain.Actor{Type: typ, ID: id}
	if (a.Type != domain.ActorAdmin && a.Type != domain.ActorSystem) || !actorIDRe.MatchString(a.ID) {
		return domain.Actor{}, fmt.Errorf("actor %q: want admin/<id> or system/<id>, the id 1-64 of [A-Za-z0-9._:@-]", s)
	}
	return a, nil
}

// keyMaterial returns the algorithm and bytes of an ed25519 or hmac-sha256 field; exactly one.
func keyMaterial(f map[string]string) (Algorithm, []byte, error) {
	id := f[specID]
	ed, hasEd := f[specEd]
	mac, hasMAC := f[specHMAC]
	switch {
	case hasEd == hasMAC:
		return "", nil, fmt.Errorf("key %s: give one of ed25519 and hmac-sha256", id)
	case hasEd:
		b, err := decodeKey(id, specEd, ed)
		return AlgEd25519, b, err
	}
	b, err := decodeKey(id, specHMAC, mac)
	return AlgHMACSHA256, b, err
}

// ParseProducerKey reads a producer key spec: id, scope (PlatformScope or a tenant id), actor and
// an Ed25519 public key or an HMAC-SHA-256 secret.
func ParseProducerKey(spec string) (ProducerKey, error) {
	f, err := parseSpec(spec, specID, specScope, specActor, specEd, specHMAC)
	if err != nil {
		return ProducerKey{}, err
	}
	id := f[specID]
	if f[specScope] == "" || f[specActor] == "" {
		return ProducerKey{}, fmt.Errorf("key %s: scope and actor are required", id)
	}
	actor, err := ParseActor(f[specActor])
	if err != nil {
		return ProducerKey{}, fmt.Errorf("key %s: %w", id, err)
	}
	alg, b, err := keyMaterial(f)
	if err != nil {
		return ProducerKey{}, err
	}
	if alg == AlgEd25519 {
		return NewEd25519ProducerKey(id, f[specScope], actor, b)
	}
	return NewHMACProducerKey(id, f[specScope], actor, b)
}

// ParseSigner reads a signing key spec: id, actor and an Ed25519 private key (its 32-byte seed)
// or an HMAC-SHA-256 secret.
func ParseSigner(spec string) (*Signer, error) {
	f, err := parseSpec(spec, specID, specActor, specEd, specHMAC)
	if err != nil {
		return nil, err
	}
	id := f[specID]
	if f[specActor] == "" {
		return nil, fmt.Errorf("key %s: actor is required", id)
	}
	actor, err := ParseActor(f[specActor])
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", id, err)
	}
	alg, b, err := keyMaterial(f)
	if err != nil {
		return nil, err
	}
	if alg == AlgEd25519 {
		return NewEd25519Signer(id, actor, b)
	}
	return NewHMACSigner(id, actor, b)
}

// ParseOpenKey reads a command-secrets key spec: id and an X25519 private key.
func ParseOpenKey(spec string) (OpenKey, error) {
	f, err := parseSpec(spec, specID, specX25519)
	if err != nil {
		return OpenKey{}, err
	}
	b, err := decodeKey(f[specID], specX25519, f[specX25519])
	if err != nil {
		return OpenKey{}, err
	}
	return NewOpenKey(f[specID], b)
}

// ParseSealKey reads a seal key spec: id and an X25519 public key.
func ParseSealKey(spec string) (SealKey, error) {
	f, err := parseSpec(spec, specID, specX25519)
	if err != nil {
		return SealKey{}, err
	}
	b, err := decodeKey(f[specID], specX25519, f[specX25519])
	if err != nil {
		return SealKey{}, err
	}
	return NewSealKey(f[specID], b)
}

// Spec is the seal key's spec (no secret in it).
func (k SealKey) Spec() string {
	return specID + "=" + k.id + ";" + specX25519 + "=" + base64.StdEncoding.EncodeToString(k.pub.Bytes())
}

// GeneratedKey is a new producer key in its two halves, as key specs: Signer for the producer
// (private: an Ed25519 private key, or the HMAC secret), Producer for every node's
// admin.producer_keys.
type GeneratedKey struct {
	Signer, Producer string
}

// GenerateProducerKey makes a new producer key id of alg for scope acting as identity.
func GenerateProducerKey(alg Algorithm, id, scope string, identity domain.Actor) (GeneratedKey, error) {
	identity.KeyID = ""
	var material, public []byte
	switch alg {
	case AlgEd25519:
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return GeneratedKey{}, err
		}
		material, public = priv.Seed(), pub
	case AlgHMACSHA256:
		material = make([]byte, minHMACSecret)
		if _, err := rand.Read(material); err != nil {
			return GeneratedKey{}, err
		}
		public = material
	default:
		return GeneratedKey{}, fmt.Errorf("algorithm %q: want %s or %s", alg, AlgEd25519, AlgHMACSHA256)
	}
	if _, err := newProducerKey(id, scope, identity, alg); err != nil {
		return GeneratedKey{}, err
	}
	actor := identity.Type + "/" + identity.ID
	enc := base64.StdEncoding.EncodeToString
	return GeneratedKey{
		Signer:   specID + "=" + id + ";" + specActor + "=" + actor + ";" + string(alg) + "=" + enc(material),
		Producer: specID + "=" + id + ";" + specScope + "=" + scope + ";" + specActor + "=" + actor + ";" + string(alg) + "=" + enc(public),
	}, nil
}

// GeneratedSecretsKey is a new command-secrets key in its two halves, as key specs: Open (the
// private key) for every node's admin.command_secret_keys, Seal (the public key) for producers.
type GeneratedSecretsKey struct {
	Open, Seal string
}

// GenerateSecretsKey makes a new command-secrets key named id.
func GenerateSecretsKey(id string) (GeneratedSecretsKey, error) {
	k, err := GenerateOpenKey(id)
	if err != nil {
		return GeneratedSecretsKey{}, err
	}
	priv, err := k.priv.Bytes()
	if err != nil {
		return GeneratedSecretsKey{}, err
	}
	return GeneratedSecretsKey{Open: specID + "=" + id + ";" + specX25519 + "=" + base64.StdEncoding.EncodeToString(priv),
		Seal: k.SealKey().Spec()}, nil
}
