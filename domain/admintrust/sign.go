package admintrust

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/imledger/imledger/domain"
)

// Headers of a signed record on im.admin.command. The signature covers the key id, the signing
// time, the record key and a SHA-256 digest of the record value (which holds event_id,
// tenant_id, event_type and payload); other headers are not covered and are not trusted.
const (
	// HeaderKeyID names the producer key.
	HeaderKeyID = "im-key-id"
	// HeaderSignedAt is the signing time, decimal Unix milliseconds.
	HeaderSignedAt = "im-signed-at"
	// HeaderSignature is the signature (Ed25519) or MAC (HMAC-SHA-256), standard base64.
	HeaderSignature = "im-signature"
)

// PlatformScope is the scope of a producer key valid for every tenant and for the platform
// commands (domain.AdminCommandInfo.Platform).
const PlatformScope = "*"

// Algorithm is how a producer key signs.
type Algorithm string

// The algorithms.
const (
	// AlgEd25519 signs with an Ed25519 private key; nodes hold only the public key.
	AlgEd25519 Algorithm = "ed25519"
	// AlgHMACSHA256 computes an HMAC-SHA-256 with a secret the producer and every node share.
	AlgHMACSHA256 Algorithm = "hmac-sha256"
)

// The reasons a record or a command is refused. Verify and Bind return errors that wrap one of
// them (a *Refusal).
var (
	// ErrSignatureRequired: the record carries none of the signature headers.
	ErrSignatureRequired = errors.New("the record is not signed")
	// ErrSignatureInvalid: the signature headers are incomplete, repeated or malformed, or the
	// signature does not verify with the key they name.
	ErrSignatureInvalid = errors.New("the signature is invalid")
	// ErrUnknownKey: no configured producer key has the record's key id.
	ErrUnknownKey = errors.New("no producer key has this id")
	// ErrStale: the signing time is before the replay window or after the clock leeway.
	ErrStale = errors.New("the signing time is outside the replay window")
	// ErrKeyScope: the key is scoped to another tenant, or the command needs a platform key.
	ErrKeyScope = errors.New("the key may not send this command")
	// ErrActorMismatch: the envelope's actor names someone other than the key's identity.
	ErrActorMismatch = errors.New("the actor is not the key's identity")
)

// Refusal is why a record or a command was refused: Err is one of the sentinels above, Detail
// says more and never holds key material; KeyID and SignedAt are what the record claimed, when
// it did.
type Refusal struct {
	Err      error
	Detail   string
	KeyID    string
	SignedAt time.Time
}

func (r *Refusal) Error() string {
	if r.Detail == "" {
		return r.Err.Error()
	}
	return r.Err.Error() + ": " + r.Detail
}

// Unwrap returns the sentinel.
func (r *Refusal) Unwrap() error { return r.Err }

// signingContext starts every signed byte string, so a producer key signs nothing else that
// could be taken for a command.
const signingContext = "imledger/admin-command/v1"

// SigningInput is the byte string a producer signs for a record: the signing context, then the
// key id, the signing time (the header's text), the record key and the SHA-256 digest of the
// value, each behind its length as a 4-byte big-endian number.
func SigningInput(keyID, signedAt string, recordKey, value []byte) []byte {
	digest := sha256.Sum256(value)
	b := make([]byte, 0, len(signingContext)+len(keyID)+len(signedAt)+len(recordKey)+len(digest)+20)
	for _, f := range [][]byte{[]byte(signingContext), []byte(keyID), []byte(signedAt), recordKey, digest[:]} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	return b
}

// FormatSignedAt is t as the signed-at header writes it: decimal Unix milliseconds.
func FormatSignedAt(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

var signedAtRe = regexp.MustCompile(`^[1-9][0-9]{0,15}$`)

// parseSignedAt reads the signed-at header: decimal Unix milliseconds without sign or leading
// zeros, so one time has one text.
func parseSignedAt(s string) (time.Time, bool) {
	if !signedAtRe.MatchString(s) {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms).UTC(), true
}

var (
	keyIDRe   = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)
	actorIDRe = regexp.MustCompile(`^[A-Za-z0-9._:@-]{1,64}$`)
)

// checkIdentity validates a key id and the identity a key acts as: an administrator
// {admin|system, 1-64 of [A-Za-z0-9._:@-]}.
func checkIdentity(keyID string, identity domain.Actor) error {
	if !keyIDRe.MatchString(keyID) {
		return fmt.Errorf("key id %q: want 1-64 of [A-Za-z0-9._:-]", keyID)
	}
	if (identity.Type != domain.ActorAdmin && identity.Type != domain.ActorSystem) || !actorIDRe.MatchString(identity.ID) {
		return fmt.Errorf("key %s: actor %q/%q: want admin/<id> or system/<id>, the id 1-64 of [A-Za-z0-9._:@-]", keyID, identity.Type, identity.ID)
	}
	return nil
}

// minHMACSecret is the shortest HMAC secret a key takes, in bytes.
const minHMACSecret = 32

// Signer signs command records with one producer key. It is safe for concurrent use and never
// prints its key.
type Signer struct {
	id       string
	identity domain.Actor
	alg      Algorithm
	priv     ed25519.PrivateKey
	secret   []byte
}

// NewEd25519Signer is a signer with the Ed25519 private key of seed (32 bytes) for key id,
// acting as identity.
func NewEd25519Signer(id string, identity domain.Actor, seed []byte) (*Signer, error) {
	if err := checkIdentity(id, identity); err != nil {
		return nil, err
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("key %s: an Ed25519 private key is %d bytes", id, ed25519.SeedSize)
	}
	identity.KeyID = ""
	return &Signer{id: id, identity: identity, alg: AlgEd25519, priv: ed25519.NewKeyFromSeed(seed)}, nil
}

// NewHMACSigner is a signer with HMAC-SHA-256 secret (at least 32 bytes) for key id, acting as
// identity.
func NewHMACSigner(id string, identity domain.Actor, secret []byte) (*Signer, error) {
	if err := checkIdentity(id, identity); err != nil {
		return nil, err
	}
	if len(secret) < minHMACSecret {
		return nil, fmt.Errorf("key %s: an HMAC-SHA-256 secret is at least %d bytes", id, minHMACSecret)
	}
	identity.KeyID = ""
	return &Signer{id: id, identity: identity, alg: AlgHMACSHA256, secret: append([]byte(nil), secret...)}, nil
}

// KeyID is the id of the signer's key.
func (s *Signer) KeyID() string { return s.id }

// Identity is the actor commands signed by s must carry: the key's identity with its key id.
func (s *Signer) Identity() domain.Actor {
	a := s.identity
	a.KeyID = s.id
	return a
}

// String names the key, never its material.
func (s *Signer) String() string {
	return fmt.Sprintf("%s (%s, %s/%s)", s.id, s.alg, s.identity.Type, s.identity.ID)
}

// Sign returns the headers that sign a record with key recordKey and value value at time at.
func (s *Signer) Sign(recordKey, value []byte, at time.Time) map[string]string {
	signedAt := FormatSignedAt(at)
	in := SigningInput(s.id, signedAt, recordKey, value)
	var sig []byte
	if s.alg == AlgEd25519 {
		sig = ed25519.Sign(s.priv, in)
	} else {
		m := hmac.New(sha256.New, s.secret)
		m.Write(in)
		sig = m.Sum(nil)
	}
	return map[string]string{HeaderKeyID: s.id, HeaderSignedAt: signedAt, HeaderSignature: base64.StdEncoding.EncodeToString(sig)}
}

// ProducerKey is a key the consumer verifies commands with: its id, the scope it is valid for
// (PlatformScope or one tenant id), the identity its commands act as, and its Ed25519 public key
// or HMAC secret. It never prints its material.
type ProducerKey struct {
	id       string
	scope    string
	identity domain.Actor
	alg      Algorithm
	pub      ed25519.PublicKey
	secret   []byte
}

func newProducerKey(id, scope string, identity domain.Actor, alg Algorithm) (ProducerKey, error) {
	if err := checkIdentity(id, identity); err != nil {
		return ProducerKey{}, err
	}
	if scope != PlatformScope {
		if _, err := domain.NewTenantID(scope); err != nil {
			return ProducerKey{}, fmt.Errorf("key %s: scope %q: want %s or a tenant id", id, scope, PlatformScope)
		}
	}
	identity.KeyID = ""
	return ProducerKey{id: id, scope: scope, identity: identity, alg: alg}, nil
}

// NewEd25519ProducerKey is the producer key id with Ed25519 public key pub (32 bytes), valid for
// scope, acting as identity.
func NewEd25519ProducerKey(id, scope string, identity domain.Actor, pub []byte) (ProducerKey, error) {
	k, err := newProducerKey(id, scope, identity, AlgEd25519)
	if err != nil {
		return ProducerKey{}, err
	}
	if len(pub) != ed25519.PublicKeySize {
		return ProducerKey{}, fmt.Errorf("key %s: an Ed25519 public key is %d bytes", id, ed25519.PublicKeySize)
	}
	k.pub = append(ed25519.PublicKey(nil), pub...)
	return k, nil
}

// NewHMACProducerKey is the producer key id with HMAC-SHA-256 secret (at least 32 bytes), valid
// for scope, acting as identity.
func NewHMACProducerKey(id, scope string, identity domain.Actor, secret []byte) (ProducerKey, error) {
	k, err := newProducerKey(id, scope, identity, AlgHMACSHA256)
	if err != nil {
		return ProducerKey{}, err
	}
	if len(secret) < minHMACSecret {
		return ProducerKey{}, fmt.Errorf("key %s: an HMAC-SHA-256 secret is at least %d bytes", id, minHMACSecret)
	}
	k.secret = append([]byte(nil), secret...)
	return k, nil
}

// ID is the key's id.
func (k ProducerKey) ID() string { return k.id }

// Scope is PlatformScope or the tenant id the key is valid for.
func (k ProducerKey) Scope() string { return k.scope }

// Platform reports whether the key is valid for every tenant and the platform commands.
func (k ProducerKey) Platform() bool { return k.scope == PlatformScope }

// Algorithm is how the key signs.
func (k ProducerKey) Algorithm() Algorithm { return k.alg }

// Identity is the actor the key's commands act as, with the key's id.
func (k ProducerKey) Identity() domain.Actor {
	a := k.identity
	a.KeyID = k.id
	return a
}

// String names the key, never its material.
func (k ProducerKey) String() string {
	return fmt.Sprintf("%s (%s, scope %s, %s/%s)", k.id, k.alg, k.scope, k.identity.Type, k.identity.ID)
}

func (k ProducerKey) verify(in, sig []byte) bool {
	if k.alg == AlgEd25519 {
		return len(sig) == ed25519.SignatureSize && ed25519.Verify(k.pub, in, sig)
	}
	m := hmac.New(sha256.New, k.secret)
	m.Write(in)
	return hmac.Equal(m.Sum(nil), sig)
}

// Headers are a record's headers by name, each with every value it was given (a name may
// repeat in a Kafka record).
type Headers map[string][]string

// Verifier checks signed records against the configured producer keys. It is safe for
// concurrent use.
type Verifier struct {
	keys           map[string]ProducerKey
	window, leeway time.Duration
}

// NewVerifier returns a verifier of keys (ids unique) that accepts signing times from
// window+leeway before now to leeway after it.
func NewVerifier(window, leeway time.Duration, keys ...ProducerKey) (*Verifier, error) {
	if window <= 0 || leeway < 0 {
		return nil, errors.New("admintrust: the replay window must be positive and the clock leeway not negative")
	}
	v := &Verifier{keys: make(map[string]ProducerKey, len(keys)), window: window, leeway: leeway}
	for _, k := range keys {
		if k.id == "" {
			return nil, errors.New("admintrust: a producer key without an id")
		}
		if _, dup := v.keys[k.id]; dup {
			return nil, fmt.Errorf("admintrust: producer key id %s twice", k.id)
		}
		v.keys[k.id] = k
	}
	return v, nil
}

// Len is the number of keys.
func (v *Verifier) Len() int { return len(v.keys) }

// Verify checks the signature of a record (its headers h, key and value) at time now and returns
// the key that signed it. It reads nothing of the value but its digest. Errors are *Refusal:
// ErrSignatureRequired (no signature header at all), ErrSignatureInvalid, ErrUnknownKey,
// ErrStale (checked once the signature verified, so the time is the producer's).
func (v *Verifier) Verify(h Headers, recordKey, value []byte, now time.Time) (ProducerKey, error) {
	ids, times, sigs := h[HeaderKeyID], h[HeaderSignedAt], h[HeaderSignature]
	if len(ids) == 0 && len(times) == 0 && len(sigs) == 0 {
		return ProducerKey{}, &Refusal{Err: ErrSignatureRequired}
	}
	if len(ids) != 1 || len(times) != 1 || len(sigs) != 1 {
		return ProducerKey{}, &Refusal{Err: ErrSignatureInvalid,
			Detail: fmt.Sprintf("want one each of the headers %s, %s and %s", HeaderKeyID, HeaderSignedAt, HeaderSignature)}
	}
	id := ids[0]
	k, ok := v.keys[id]
	if !ok {
		return ProducerKey{}, &Refusal{Err: ErrUnknownKey, KeyID: id}
	}
	at, ok := parseSignedAt(times[0])
	if !ok {
		return ProducerKey{}, &Refusal{Err: ErrSignatureInvalid, KeyID: id, Detail: HeaderSignedAt + ": want decimal Unix milliseconds"}
	}
	sig, err := base64.StdEncoding.DecodeString(sigs[0])
	if err != nil || !k.verify(SigningInput(id, times[0], recordKey, value), sig) {
		return ProducerKey{}, &Refusal{Err: ErrSignatureInvalid, KeyID: id}
	}
	if at.Before(now.Add(-v.window-v.leeway)) || at.After(now.Add(v.leeway)) {
		return ProducerKey{}, &Refusal{Err: ErrStale, KeyID: id, SignedAt: at,
			Detail: fmt.Sprintf("signed at %s, accepted from %s before to %s after the consumer's time", at.Format(time.RFC3339Nano), v.window+v.leeway, v.leeway)}
	}
	return k, nil
}

// Bind checks a verified command against the key that signed it and returns it acting as the
// key's identity: the key must be platform-wide or scoped to the command's tenant, and a
// platformOnly command (domain.AdminCommandInfo.Platform) needs a platform key (ErrKeyScope); an
// envelope actor that names anyone but the key's identity, or another key id, is ErrActorMismatch
// (an empty actor takes the identity). The returned command's actor carries the key id.
func Bind(k ProducerKey, cmd domain.AdminCommand, platformOnly bool) (domain.AdminCommand, error) {
	switch {
	case platformOnly && !k.Platform():
		return cmd, &Refusal{Err: ErrKeyScope, KeyID: k.id, Detail: "a platform command needs a platform-wide key; key " + k.id + " is scoped to tenant " + k.scope}
	case !k.Platform() && cmd.TenantID != k.scope:
		return cmd, &Refusal{Err: ErrKeyScope, KeyID: k.id, Detail: "key " + k.id + " is scoped to tenant " + k.scope}
	}
	a := cmd.Actor
	if a == (domain.Actor{}) {
		a = k.identity
	}
	if a.Type != k.identity.Type || a.ID != k.identity.ID || (a.KeyID != "" && a.KeyID != k.id) {
		return cmd, &Refusal{Err: ErrActorMismatch, KeyID: k.id,
			Detail: fmt.Sprintf("key %s acts as %s/%s", k.id, k.identity.Type, k.identity.ID)}
	}
	cmd.Actor = k.Identity()
	return cmd, nil
}

// BindUnsigned checks an unsigned command a consumer accepts (the embedded broker): it may not
// claim a key id it was not verified with (ErrActorMismatch).
func BindUnsigned(cmd domain.AdminCommand) (domain.AdminCommand, error) {
	if cmd.Actor.KeyID != "" {
		return cmd, &Refusal{Err: ErrActorMismatch, Detail: "an unsigned command names no key id"}
	}
	return cmd, nil
}
