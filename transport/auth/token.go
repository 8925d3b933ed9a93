package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
)

// Stable token errors. Every error of Verify wraps exactly one of them.
var (
	// ErrTokenInvalid means the token is malformed, signed with an unknown key, carries a bad
	// signature or bad claims, or belongs to another tenant.
	ErrTokenInvalid = errors.New("token invalid")
	// ErrTokenExpired means a correctly signed token is past its expiry (beyond the leeway).
	ErrTokenExpired = errors.New("token expired")
)

// MaxTokenLen is the longest token Verify looks at; longer input is ErrTokenInvalid.
const MaxTokenLen = 2048

// Principal is who a verified token speaks for.
type Principal struct {
	Tenant    domain.TenantID
	User      domain.UserID
	ExpiresAt time.Time
	// IssuedAt is when the token was issued, to the millisecond (to the second for tokens
	// without iat_ms). A user's or tenant's not-before time refuses tokens issued before it.
	IssuedAt time.Time
	// Session is the login session the token belongs to (claim sid): signing the session out
	// refuses the token. "" for a token without one (issued before sessions existed, or by
	// `imledger token issue`), which lives until it expires or its user's tokens are revoked.
	Session string
}

// header is the JOSE header of every token. Only HS256 is ever accepted.
type header struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
	Kid string `json:"kid"`
}

// claims is the token payload. tid is the tenant, sub the user id as a decimal string; iat and
// exp are JWT NumericDates (seconds since the epoch); iat_ms is iat in milliseconds, so a
// revocation can tell tokens issued within the same second apart.
type claims struct {
	Tenant     string `json:"tid"`
	Subject    string `json:"sub"`
	IssuedAt   int64  `json:"iat"`
	IssuedAtMs int64  `json:"iat_ms,omitempty"`
	Expires    int64  `json:"exp"`
	ID         string `json:"jti"`
	Session    string `json:"sid,omitempty"`
}

// Signer issues and verifies tokens. It is safe for concurrent use.
//
// A token is a compact JWT, base64url(header).base64url(claims).base64url(signature), where the
// signature is HMAC-SHA256 over the first two parts with the key named by the header's kid.
// Verify accepts only alg HS256 and a kid from Config.Keys, compares signatures in constant time
// and parses the claims only after the signature checked out.
type Signer struct {
	cfg  Config
	keys map[string][]byte
}

// NewSigner validates cfg and returns a Signer.
func NewSigner(cfg Config) (*Signer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	keys := make(map[string][]byte, len(cfg.Keys))
	for _, k := range cfg.Keys {
		keys[k.ID] = []byte(k.Secret)
	}
	return &Signer{cfg: cfg, keys: keys}, nil
}

var b64 = base64.RawURLEncoding.Strict()

// Issue returns a token for user of tenant that expires after ttl, signed with the signing key.
// It fails when the tenant or user is unset or ttl is not in (0, MaxTTL]. Expiry has a
// resolution of one second.
func (s *Signer) Issue(tenant domain.TenantID, user domain.UserID, ttl time.Duration) (string, error) {
	return s.IssueFrom(tenant, user, s.cfg.Now(), ttl)
}

// IssueFrom is Issue for a token issued at from, a moment before now, and expiring ttl after
// it. A login stamps its token with the time it began, before it read the password hash, so a
// revocation or password reset that lands while the password is being checked revokes the token
// too. It fails as Issue does, and when from is zero or later than now.
func (s *Signer) IssueFrom(tenant domain.TenantID, user domain.UserID, from time.Time, ttl time.Duration) (string, error) {
	return s.issue(tenant, user, "", from, ttl)
}

// IssueSession is IssueFrom for a token of login session session (claim sid; see
// domain.CheckSessionID), which signing the session out revokes. It fails as IssueFrom does, and
// for a malformed session id.
func (s *Signer) IssueSession(tenant domain.TenantID, user domain.UserID, session string, from time.Time, ttl time.Duration) (string, error) {
	if err := domain.CheckSessionID(session); err != nil {
		return "", fmt.Errorf("issue token: %w", err)
	}
	return s.issue(tenant, user, session, from, ttl)
}

func (s *Signer) issue(tenant domain.TenantID, user domain.UserID, session string, from time.Time, ttl time.Duration) (string, error) {
	switch {
	case tenant.IsZero():
		return "", errors.New("issue token: tenant is required")
	case user <= 0:
		return "", errors.New("issue token: user is required")
	case ttl <= 0 || ttl > s.cfg.MaxTTL:
		return "", fmt.Errorf("issue token: ttl %s outside (0, %s]", ttl, s.cfg.MaxTTL)
	case from.IsZero() || from.After(s.cfg.Now()):
		return "", fmt.Errorf("issue token: issue time %s is not a moment before now", from.Format(time.RFC3339Nano))
	}
	var jti [12]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", fmt.Errorf("issue token: %w", err)
	}
	now := from
	h, err := json.Marshal(header{Alg: "HS256", Typ: "JWT", Kid: s.cfg.SigningKeyID})
	if err != nil {
		return "", fmt.Errorf("issue token: %w", err)
	}
	c, err := json.Marshal(claims{
		Tenant: tenant.String(), Subject: user.String(), IssuedAt: now.Unix(), IssuedAtMs: now.UnixMilli(),
		Expires: now.Add(ttl).Unix(), ID: b64.EncodeToString(jti[:]), Session: session,
	})
	if err != nil {
		return "", fmt.Errorf("issue token: %w", err)
	}
	signed := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	return signed + "." + b64.EncodeToString(sign(s.keys[s.cfg.SigningKeyID], signed)), nil
}

func sign(key []byte, signed string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// invalid wraps ErrTokenInvalid with a detail for logs; clients only ever see the sentinel's
// stable reason.
func invalid(detail string) error { return fmt.Errorf("%w: %s", ErrTokenInvalid, detail) }

// Verify checks token and returns its principal. Errors wrap ErrTokenInvalid or ErrTokenExpired;
// an expired token is reported as expired only when its signature is valid. Config.MaxTTL bounds
// verification as it bounds issuing: a correctly signed token whose lifetime (exp − iat) is
// longer, or that expires later than MaxTTL from now (plus the leeway), is ErrTokenInvalid, so a
// token minted with a longer lifetime, by an older configuration or a tool, is not honoured.
func (s *Signer) Verify(token string) (Principal, error) {
	if len(token) == 0 || len(token) > MaxTokenLen {
		return Principal{}, invalid("empty or too long")
	}
	hs, rest, ok1 := strings.Cut(token, ".")
	cs, ss, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(ss, ".") {
		return Principal{}, invalid("not three segments")
	}
	var h header
	if err := decodeSegment(hs, &h); err != nil {
		return Principal{}, invalid("header: " + err.Error())
	}
	if h.Alg != "HS256" {
		return Principal{}, invalid("unsupported alg")
	}
	key, ok := s.keys[h.Kid]
	if !ok {
		return Principal{}, invalid("unknown key id")
	}
	sig, err := b64.DecodeString(ss)
	if err != nil {
		return Principal{}, invalid("signature encoding")
	}
	if !hmac.Equal(sig, sign(key, token[:len(hs)+1+len(cs)])) {
		return Principal{}, invalid("bad signature")
	}
	var c claims
	if err := decodeSegment(cs, &c); err != nil {
		return Principal{}, invalid("claims: " + err.Error())
	}
	return s.principal(c)
}

// principal checks the claims of a correctly signed token.
func (s *Signer) principal(c claims) (Principal, error) {
	tenant, err := domain.NewTenantID(c.Tenant)
	if err != nil {
		return Principal{}, invalid("tenant claim")
	}
	user, err := domain.ParseUserID(c.Subject)
	if err != nil {
		return Principal{}, invalid("subject claim")
	}
	if c.Session != "" && domain.CheckSessionID(c.Session) != nil {
		return Principal{}, invalid("session claim")
	}
	if c.Expires <= 0 || c.IssuedAt <= 0 || c.Expires < c.IssuedAt {
		return Principal{}, invalid("missing or inconsistent times")
	}
	// Issue rounds both times down to the second, so a lifetime may exceed its ttl by a second.
	if c.Expires-c.IssuedAt > int64((s.cfg.MaxTTL+time.Second)/time.Second) {
		return Principal{}, invalid("lifetime beyond max_ttl")
	}
	now := s.cfg.Now()
	if time.Unix(c.IssuedAt, 0).After(now.Add(s.cfg.Leeway)) {
		return Principal{}, invalid("issued in the future")
	}
	exp := time.Unix(c.Expires, 0).UTC()
	if exp.After(now.Add(s.cfg.MaxTTL + s.cfg.Leeway + time.Second)) {
		return Principal{}, invalid("expires beyond max_ttl")
	}
	if !now.Before(exp.Add(s.cfg.Leeway)) {
		return Principal{}, fmt.Errorf("%w at %s", ErrTokenExpired, exp.Format(time.RFC3339))
	}
	issued := time.Unix(c.IssuedAt, 0).UTC()
	if c.IssuedAtMs/1000 == c.IssuedAt {
		issued = time.UnixMilli(c.IssuedAtMs).UTC()
	}
	return Principal{Tenant: tenant, User: user, ExpiresAt: exp, IssuedAt: issued, Session: c.Session}, nil
}

// VerifyFor is Verify plus a check that the token belongs to tenant: a token of another tenant
// is ErrTokenInvalid, whatever else it carries.
func (s *Signer) VerifyFor(token string, tenant domain.TenantID) (Principal, error) {
	p, err := s.Verify(token)
	if err != nil {
		return Principal{}, err
	}
	if p.Tenant != tenant {
		return Principal{}, invalid("issued for another tenant")
	}
	return p, nil
}

func decodeSegment(seg string, v any) error {
	raw, err := b64.DecodeString(seg)
	if err != nil {
		return errors.New("bad base64url")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return errors.New("bad json")
	}
	return nil
}
