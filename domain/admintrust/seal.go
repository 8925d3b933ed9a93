package admintrust

import (
	"crypto/ecdh"
	"crypto/hpke"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
)

// SealSuite names the HPKE suite secret fields are sealed with (RFC 9180, base mode):
// DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-256-GCM.
const SealSuite = "hpke-x25519-sha256-aes256gcm"

// ErrSecretUnreadable: a sealed secret names no command-secrets key of the node, or does not
// open with it for this command and field (tampered, or sealed for another command).
var ErrSecretUnreadable = errors.New("the sealed secret cannot be opened")

// sealInfo is the HPKE info of every seal: what the key is used for.
const sealInfo = "imledger/admin-command-secret/v1"

var kem = hpke.DHKEM(ecdh.X25519())

func suite() (hpke.KDF, hpke.AEAD) { return hpke.HKDFSHA256(), hpke.AES256GCM() }

// SecretContext is what a sealed secret is bound to (its additional authenticated data): the
// command's tenant, type and event id, and the field's name as the payload type names it. A
// sealed secret copied into another command or field does not open.
type SecretContext struct {
	TenantID  string
	EventType string
	EventID   uuid.UUID
	Field     string
}

// ContextOf is the context of field of cmd.
func ContextOf(cmd domain.AdminCommand, field string) SecretContext {
	return SecretContext{TenantID: cmd.TenantID, EventType: cmd.EventType, EventID: cmd.EventID, Field: field}
}

func (c SecretContext) aad() []byte {
	var b []byte
	for _, f := range [][]byte{[]byte(sealInfo), []byte(c.TenantID), []byte(c.EventType), c.EventID[:], []byte(c.Field)} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	return b
}

// SealKey is the public half of a node's command-secrets key: what producers seal secret fields
// to.
type SealKey struct {
	id  string
	pub hpke.PublicKey
}

// NewSealKey is the seal key id with X25519 public key public (32 bytes).
func NewSealKey(id string, public []byte) (SealKey, error) {
	if !keyIDRe.MatchString(id) {
		return SealKey{}, fmt.Errorf("key id %q: want 1-64 of [A-Za-z0-9._:-]", id)
	}
	pub, err := kem.NewPublicKey(public)
	if err != nil {
		return SealKey{}, fmt.Errorf("key %s: not an X25519 public key", id)
	}
	return SealKey{id: id, pub: pub}, nil
}

// ID is the key's id.
func (k SealKey) ID() string { return k.id }

// Bytes is the X25519 public key.
func (k SealKey) Bytes() []byte { return k.pub.Bytes() }

// Seal seals plaintext for the field and command of c.
func (k SealKey) Seal(c SecretContext, plaintext []byte) (domain.SealedSecret, error) {
	if k.pub == nil {
		return domain.SealedSecret{}, errors.New("admintrust: no seal key")
	}
	kdf, aead := suite()
	enc, s, err := hpke.NewSender(k.pub, kdf, aead, []byte(sealInfo))
	if err != nil {
		return domain.SealedSecret{}, fmt.Errorf("admintrust: seal: %w", err)
	}
	ct, err := s.Seal(c.aad(), plaintext)
	if err != nil {
		return domain.SealedSecret{}, fmt.Errorf("admintrust: seal: %w", err)
	}
	return domain.SealedSecret{Sealed: SealSuite, KeyID: k.id, Enc: base64.StdEncoding.EncodeToString(enc),
		Ciphertext: base64.StdEncoding.EncodeToString(ct)}, nil
}

// OpenKey is a node's command-secrets key: the X25519 private key sealed secrets are opened
// with. It never prints its material.
type OpenKey struct {
	id   string
	priv hpke.PrivateKey
}

// NewOpenKey is the command-secrets key id with X25519 private key private (32 bytes).
func NewOpenKey(id string, private []byte) (OpenKey, error) {
	if !keyIDRe.MatchString(id) {
		return OpenKey{}, fmt.Errorf("key id %q: want 1-64 of [A-Za-z0-9._:-]", id)
	}
	priv, err := kem.NewPrivateKey(private)
	if err != nil {
		return OpenKey{}, fmt.Errorf("key %s: not an X25519 private key", id)
	}
	return OpenKey{id: id, priv: priv}, nil
}

// GenerateOpenKey makes a new command-secrets key named id.
func GenerateOpenKey(id string) (OpenKey, error) {
	if !keyIDRe.MatchString(id) {
		return OpenKey{}, fmt.Errorf("key id %q: want 1-64 of [A-Za-z0-9._:-]", id)
	}
	priv, err := kem.GenerateKey()
	if err != nil {
		return OpenKey{}, err
	}
	return OpenKey{id: id, priv: priv}, nil
}

// ID is the key's id.
func (k OpenKey) ID() string { return k.id }

// SealKey is the key's public half.
func (k OpenKey) SealKey() SealKey { return SealKey{id: k.id, pub: k.priv.PublicKey()} }

// String names the key, never its material.
func (k OpenKey) String() string { return k.id + " (x25519)" }

// Opener opens sealed secrets with the node's command-secrets keys; two keys at once let a
// deployment rotate (producers move to the new public key, then the old key is removed). It is
// safe for concurrent use.
type Opener struct {
	keys map[string]OpenKey
}

// NewOpener returns an opener of keys (ids unique); none is allowed (every sealed secret is then
// unreadable).
func NewOpener(keys ...OpenKey) (*Opener, error) {
	o := &Opener{keys: make(map[string]OpenKey, len(keys))}
	for _, k := range keys {
		if _, dup := o.keys[k.id]; dup {
			return nil, fmt.Errorf("admintrust: command-secrets key id %s twice", k.id)
		}
		o.keys[k.id] = k
	}
	return o, nil
}

// Open returns the plaintext of s sealed for c. Errors wrap ErrSecretUnreadable and name the key
// id at most.
func (o *Opener) Open(c SecretContext, s domain.SealedSecret) ([]byte, error) {
	k, ok := o.keys[s.KeyID]
	if !ok {
		return nil, fmt.Errorf("%w: no command-secrets key %q on this node", ErrSecretUnreadable, s.KeyID)
	}
	if s.Sealed != SealSuite {
		return nil, fmt.Errorf("%w: suite %q, want %s", ErrSecretUnreadable, s.Sealed, SealSuite)
	}
	enc, err1 := base64.StdEncoding.DecodeString(s.Enc)
	ct, err2 := base64.StdEncoding.DecodeString(s.Ciphertext)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: enc and ciphertext must be standard base64", ErrSecretUnreadable)
	}
	kdf, aead := suite()
	r, err := hpke.NewRecipient(enc, k.priv, kdf, aead, []byte(sealInfo))
	if err != nil {
		return nil, fmt.Errorf("%w: bad encapsulated key", ErrSecretUnreadable)
	}
	pt, err := r.Open(c.aad(), ct)
	if err != nil {
		return nil, fmt.Errorf("%w: it does not open with key %s for this command and field", ErrSecretUnreadable, k.id)
	}
	return pt, nil
}

// SealPayload returns cmd's payload with every secret field (domain.AdminCommandInfo
// SecretFields, matched case-insensitively as encoding/json matches them) that holds a plain
// string sealed to k for cmd; fields sealed or redacted already are kept. A command of an unknown
// type, without secret fields, or whose payload is not a JSON object is returned as it is (the
// consumer refuses the latter).
func SealPayload(k SealKey, cmd domain.AdminCommand) (json.RawMessage, error) {
	info, ok := domain.LookupAdminCommand(domain.AdminCommandType(cmd.EventType))
	if !ok || len(info.SecretFields()) == 0 {
		return cmd.Payload, nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(cmd.Payload, &fields) != nil || fields == nil {
		return cmd.Payload, nil
	}
	changed := false
	for key, v := range fields {
		for _, name := range info.SecretFields() {
			if !strings.EqualFold(key, name) {
				continue
			}
			var s domain.Secret
			if json.Unmarshal(v, &s) != nil {
				continue
			}
			text, plain := s.Plain()
			if !plain {
				continue
			}
			sealed, err := k.Seal(ContextOf(cmd, name), []byte(text))
			if err != nil {
				return nil, err
			}
			if fields[key], err = json.Marshal(sealed); err != nil {
				return nil, err
			}
			changed = true
		}
	}
	if !changed {
		return cmd.Payload, nil
	}
	return json.Marshal(fields)
}
