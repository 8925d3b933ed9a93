package passhash

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"

	"github.com/imledger/imledger/domain"
)

// Password errors.
var (
	// ErrMismatch means the password does not match the stored hash.
	ErrMismatch = errors.New("password mismatch")
	// ErrMalformed means a stored hash is not an argon2id PHC string this package accepts.
	ErrMalformed = errors.New("malformed password hash")
)

// MaxPasswordLen is the longest password accepted, in bytes.
const MaxPasswordLen = 1024

// Params are the argon2id cost parameters.
type Params struct {
	Memory  uint32 // KiB of memory, at least 8 × Threads
	Time    uint32 // passes over the memory, at least 1
	Threads uint8  // lanes, at least 1
	SaltLen uint32 // random salt bytes, 16..64
	KeyLen  uint32 // derived key bytes, 16..128
}

// DefaultParams is the second recommended option of RFC 9106 §4 (64 MiB, 3 passes,
// 4 lanes) with a 16-byte salt and a 32-byte key.
var DefaultParams = Params{Memory: 64 << 10, Time: 3, Threads: 4, SaltLen: 16, KeyLen: 32}

// Limits on parameters read from a stored hash, so a corrupted or hostile row cannot make
// Verify allocate gigabytes or spin for minutes.
const (
	maxMemoryKiB = 1 << 20 // 1 GiB
	maxTime      = 64
)

func (p Params) validate() error {
	switch {
	case p.Threads < 1 || p.Time < 1 || p.Time > maxTime:
		return fmt.Errorf("argon2id: time %d or threads %d out of range", p.Time, p.Threads)
	case p.Memory < 8*uint32(p.Threads) || p.Memory > maxMemoryKiB:
		return fmt.Errorf("argon2id: memory %d KiB out of range", p.Memory)
	case p.SaltLen < 16 || p.SaltLen > 64:
		return fmt.Errorf("argon2id: salt length %d out of range", p.SaltLen)
	case p.KeyLen < 16 || p.KeyLen > 128:
		return fmt.Errorf("argon2id: key length %d out of range", p.KeyLen)
	}
	return nil
}

// Check reports why Hash would refuse password: a *domain.ValidationError
// (field "password") when it is empty or longer than MaxPasswordLen, else nil.
func Check(password string) error {
	if password == "" {
		return &domain.ValidationError{Field: "password", Reason: "required"}
	}
	if len(password) > MaxPasswordLen {
		return &domain.ValidationError{Field: "password", Reason: "too_long", Detail: fmt.Sprintf("at most %d bytes", MaxPasswordLen)}
	}
	return nil
}

var phcB64 = base64.RawStdEncoding.Strict()

// Hash derives an argon2id hash of password with a fresh random salt and returns it in
// PHC string format: $argon2id$v=19$m=<KiB>,t=<time>,p=<threads>$<salt>$<hash>, base64 without
// padding. An empty or over-long password is a *domain.ValidationError (field "password").
func Hash(password string, p Params) (string, error) {
	if err := Check(password); err != nil {
		return "", err
	}
	if err := p.validate(); err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	salt := make([]byte, p.SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, p.KeyLen)
	return encodePHC(p, salt, key), nil
}

// Dummy returns a hash in Hash's format with p's parameters, a random salt and a
// random key in place of a derived one, so no password matches it. Verify against it
// costs what it costs against a real hash made with p and answers ErrMismatch; making
// it costs none of the derivation's time or p.Memory of RAM.
func Dummy(p Params) (string, error) {
	if err := p.validate(); err != nil {
		return "", fmt.Errorf("dummy hash: %w", err)
	}
	b := make([]byte, p.SaltLen+p.KeyLen)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("dummy hash: %w", err)
	}
	return encodePHC(p, b[:p.SaltLen], b[p.SaltLen:]), nil
}

func encodePHC(p Params, salt, key []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.Memory, p.Time, p.Threads,
		phcB64.EncodeToString(salt), phcB64.EncodeToString(key))
}

// Verify checks password against a hash from Hash. It returns nil on a match,
// ErrMismatch when the password differs (compared in constant time), and an error
// wrapping ErrMalformed when encoded is not a supported argon2id PHC string.
func Verify(password, encoded string) error {
	p, salt, want, err := parsePHC(encoded)
	if err != nil {
		return err
	}
	if password == "" || len(password) > MaxPasswordLen {
		return ErrMismatch
	}
	got := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, p.KeyLen)
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return ErrMismatch
	}
	return nil
}

// NeedsRehash reports whether encoded was made with parameters other than p (or cannot be
// parsed), so a successful login should store a fresh Hash(password, p).
func NeedsRehash(encoded string, p Params) bool {
	got, _, _, err := parsePHC(encoded)
	return err != nil || got != p
}

// parsePHC splits a PHC string into parameters, salt and key.
func parsePHC(encoded string) (Params, []byte, []byte, error) {
	bad := func(detail string) (Params, []byte, []byte, error) {
		return Params{}, nil, nil, fmt.Errorf("%w: %s", ErrMalformed, detail)
	}
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return bad("want $argon2id$v=..$m=..,t=..,p=..$salt$hash")
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return bad("unsupported version")
	}
	var (
		p       Params
		threads uint32
	)
	if n, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.Memory, &p.Time, &threads); err != nil || n != 3 ||
		fmt.Sprintf("m=%d,t=%d,p=%d", p.Memory, p.Time, threads) != parts[3] || threads > 255 {
		return bad("parameters")
	}
	p.Threads = uint8(threads)
	salt, err1 := phcB64.DecodeString(parts[4])
	key, err2 := phcB64.DecodeString(parts[5])
	if err1 != nil || err2 != nil {
		return bad("salt or hash encoding")
	}
	p.SaltLen, p.KeyLen = uint32(len(salt)), uint32(len(key))
	if err := p.validate(); err != nil {
		return bad(err.Error())
	}
	return p, salt, key, nil
}
