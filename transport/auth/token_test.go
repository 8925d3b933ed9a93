package auth_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/auth"
)

var (
	secretA = strings.Repeat("a", 32)
	secretB = strings.Repeat("b", 40)
	acme    = domain.MustTenantID("acme")
	globex  = domain.MustTenantID("globex")
)

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newSigner(t *testing.T, c *clock, keys []auth.Key, signing string) *auth.Signer {
	t.Helper()
	s, err := auth.NewSigner(auth.Config{Keys: keys, SigningKeyID: signing, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestIssueVerify(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s := newSigner(t, c, []auth.Key{{ID: "k1", Secret: secretA}}, "")
	tok, err := s.Issue(acme, 42, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	want := auth.Principal{Tenant: acme, User: 42, ExpiresAt: c.t.Add(time.Hour), IssuedAt: c.t}
	if p != want {
		t.Fatalf("principal = %+v, want %+v", p, want)
	}
	if _, err := s.VerifyFor(tok, acme); err != nil {
		t.Errorf("VerifyFor own tenant: %v", err)
	}
	if _, err := s.VerifyFor(tok, globex); !errors.Is(err, auth.ErrTokenInvalid) {
		t.Errorf("VerifyFor other tenant = %v, want ErrTokenInvalid", err)
	}
	other, _ := s.Issue(acme, 42, time.Hour)
	if other == tok {
		t.Error("two tokens for the same principal are identical; jti is missing")
	}
}

func TestVerifyRejects(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s := newSigner(t, c, []auth.Key{{ID: "k1", Secret: secretA}}, "")
	foreign := newSigner(t, c, []auth.Key{{ID: "k1", Secret: secretB}}, "")
	good, _ := s.Issue(acme, 42, time.Hour)
	h, claims, sig := split(t, good)
	forged, _ := foreign.Issue(acme, 42, time.Hour)

	tests := []struct {
		name  string
		token string
		want  error
	}{
		{name: "empty", token: "", want: auth.ErrTokenInvalid},
		{name: "two segments", token: h + "." + claims, want: auth.ErrTokenInvalid},
		{name: "four segments", token: good + ".x", want: auth.ErrTokenInvalid},
		{name: "too long", token: strings.Repeat("a", auth.MaxTokenLen+1), want: auth.ErrTokenInvalid},
		{name: "other secret, same kid", token: forged, want: auth.ErrTokenInvalid},
		{name: "tampered claims", token: h + "." + b64(`{"tid":"globex","sub":"42","iat":1777636800,"exp":1777640400}`) + "." + sig, want: auth.ErrTokenInvalid},
		{name: "tampered signature", token: h + "." + claims + "." + flip(sig), want: auth.ErrTokenInvalid},
		{name: "alg none", token: b64(`{"alg":"none","typ":"JWT","kid":"k1"}`) + "." + claims + ".", want: auth.ErrTokenInvalid},
		{name: "alg HS512", token: b64(`{"alg":"HS512","typ":"JWT","kid":"k1"}`) + "." + claims + "." + sig, want: auth.ErrTokenInvalid},
		{name: "unknown kid", token: b64(`{"alg":"HS256","typ":"JWT","kid":"k9"}`) + "." + claims + "." + sig, want: auth.ErrTokenInvalid},
		{name: "header not base64", token: "!!." + claims + "." + sig, want: auth.ErrTokenInvalid},
		{name: "padded signature", token: good + "=", want: auth.ErrTokenInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := s.Verify(tt.token)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %+v, %v; want %v", p, err, tt.want)
			}
			if errors.Is(err, auth.ErrTokenExpired) == errors.Is(err, auth.ErrTokenInvalid) {
				t.Errorf("error %v wraps both or neither sentinel", err)
			}
		})
	}
}

// TestSignedBadClaims signs malformed claims with the right key: the signature is fine, the
// claims are not.
func TestSignedBadClaims(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	s := newSigner(t, c, []auth.Key{{ID: "k1", Secret: secretA}}, "")
	tests := []struct {
		name   string
		claims string
		want   error
	}{
		{name: "bad tenant", claims: `{"tid":"ACME!","sub":"42","iat":1800000000,"exp":1800003600}`, want: auth.ErrTokenInvalid},
		{name: "no subject", claims: `{"tid":"acme","iat":1800000000,"exp":1800003600}`, want: auth.ErrTokenInvalid},
		{name: "zero user", claims: `{"tid":"acme","sub":"0","iat":1800000000,"exp":1800003600}`, want: auth.ErrTokenInvalid},
		{name: "no exp", claims: `{"tid":"acme","sub":"42","iat":1800000000}`, want: auth.ErrTokenInvalid},
		{name: "issued in the future", claims: `{"tid":"acme","sub":"42","iat":1800003000,"exp":1800009000}`, want: auth.ErrTokenInvalid},
		{name: "expired", claims: `{"tid":"acme","sub":"42","iat":1799990000,"exp":1799999000}`, want: auth.ErrTokenExpired},
		{name: "not json", claims: `tid=acme`, want: auth.ErrTokenInvalid},
		{name: "negative iat", claims: `{"tid":"acme","sub":"42","iat":-1,"exp":1800003600}`, want: auth.ErrTokenInvalid},
		// The default max_ttl is 30 days (2,592,000 s).
		{name: "five years", claims: `{"tid":"acme","sub":"42","iat":1800000000,"exp":1957680000}`, want: auth.ErrTokenInvalid},
		{name: "old iat, long lifetime", claims: `{"tid":"acme","sub":"42","iat":1700000000,"exp":1800003600}`, want: auth.ErrTokenInvalid},
		{name: "iat in leeway, exp beyond max_ttl", claims: `{"tid":"acme","sub":"42","iat":1800000020,"exp":1802592100}`, want: auth.ErrTokenInvalid},
		{name: "session with a slash", claims: `{"tid":"acme","sub":"42","iat":1800000000,"exp":1800003600,"sid":"a/b"}`, want: auth.ErrTokenInvalid},
		{name: "session too long", claims: `{"tid":"acme","sub":"42","iat":1800000000,"exp":1800003600,"sid":"` + strings.Repeat("s", 65) + `"}`, want: auth.ErrTokenInvalid},
		{name: "with a session", claims: `{"tid":"acme","sub":"42","iat":1800000000,"exp":1800003600,"sid":"0194-abc_D"}`, want: nil},
		{name: "exactly max_ttl", claims: `{"tid":"acme","sub":"42","iat":1800000000,"exp":1802592000}`, want: nil},
		{name: "ok", claims: `{"tid":"acme","sub":"usr42","iat":1800000000,"exp":1800003600}`, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tok := resign(t, s, tt.claims)
			p, err := s.Verify(tok)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %+v, %v; want %v", p, err, tt.want)
			}
			if err == nil && (p.Tenant != acme || p.User != 42) {
				t.Errorf("principal = %+v", p)
			}
		})
	}
}

// resign keeps the header of a fresh token, replaces its claims and signs the result with
// secretA, the signer's only key, so only the claims are at fault.
func resign(t *testing.T, s *auth.Signer, claims string) string {
	t.Helper()
	tok, err := s.Issue(acme, 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h, _, _ := split(t, tok)
	signed := h + "." + b64(claims)
	return signed + "." + base64.RawURLEncoding.EncodeToString(hmacSHA256([]byte(secretA), signed))
}

func TestExpiryAndLeeway(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	c := &clock{t: start}
	s := newSigner(t, c, []auth.Key{{ID: "k1", Secret: secretA}}, "")
	tok, err := s.Issue(acme, 7, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		after time.Duration
		want  error
	}{
		{after: 0, want: nil},
		{after: time.Minute + 29*time.Second, want: nil}, // inside the default 30 s leeway
		{after: time.Minute + 30*time.Second, want: auth.ErrTokenExpired},
		{after: 24 * time.Hour, want: auth.ErrTokenExpired},
	}
	for _, tt := range tests {
		c.t = start.Add(tt.after)
		if _, err := s.Verify(tok); !errors.Is(err, tt.want) {
			t.Errorf("after %s: Verify = %v, want %v", tt.after, err, tt.want)
		}
	}
}

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Now()}
	old := newSigner(t, c, []auth.Key{{ID: "2026-01", Secret: secretA}}, "")
	oldTok, _ := old.Issue(acme, 1, time.Hour)

	both := newSigner(t, c, []auth.Key{{ID: "2026-01", Secret: secretA}, {ID: "2026-06", Secret: secretB}}, "2026-06")
	newTok, _ := both.Issue(acme, 2, time.Hour)
	if p, err := both.Verify(oldTok); err != nil || p.User != 1 {
		t.Errorf("old token during rotation: %+v, %v", p, err)
	}
	if p, err := both.Verify(newTok); err != nil || p.User != 2 {
		t.Errorf("new token: %+v, %v", p, err)
	}
	if _, err := old.Verify(newTok); !errors.Is(err, auth.ErrTokenInvalid) {
		t.Errorf("new token on a node without the new key = %v, want ErrTokenInvalid", err)
	}
	retired := newSigner(t, c, []auth.Key{{ID: "2026-06", Secret: secretB}}, "")
	if _, err := retired.Verify(oldTok); !errors.Is(err, auth.ErrTokenInvalid) {
		t.Errorf("old token after its key was retired = %v, want ErrTokenInvalid", err)
	}
}

func TestIssueRejects(t *testing.T) {
	t.Parallel()
	s := newSigner(t, &clock{t: time.Now()}, []auth.Key{{ID: "k1", Secret: secretA}}, "")
	tests := []struct {
		name   string
		tenant domain.TenantID
		user   domain.UserID
		ttl    time.Duration
	}{
		{name: "no tenant", user: 1, ttl: time.Hour},
		{name: "no user", tenant: acme, ttl: time.Hour},
		{name: "zero ttl", tenant: acme, user: 1},
		{name: "ttl over max", tenant: acme, user: 1, ttl: 31 * 24 * time.Hour},
	}
	for _, tt := range tests {
		if tok, err := s.Issue(tt.tenant, tt.user, tt.ttl); err == nil {
			t.Errorf("%s: Issue = %q, want an error", tt.name, tok)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  auth.Config
		want string // substring of the error; empty means valid
	}{
		{name: "ok", cfg: auth.Config{Keys: []auth.Key{{ID: "k1", Secret: secretA}}}},
		{name: "no keys", cfg: auth.Config{}, want: "at least one key"},
		{name: "short secret", cfg: auth.Config{Keys: []auth.Key{{ID: "k1", Secret: "short"}}}, want: "at least 32 bytes"},
		{name: "bad id", cfg: auth.Config{Keys: []auth.Key{{ID: "k 1", Secret: secretA}}}, want: "keys[0].id"},
		{name: "duplicate id", cfg: auth.Config{Keys: []auth.Key{{ID: "k1", Secret: secretA}, {ID: "k1", Secret: secretB}}}, want: "duplicated"},
		{name: "unknown signing key", cfg: auth.Config{Keys: []auth.Key{{ID: "k1", Secret: secretA}}, SigningKeyID: "k2"}, want: "names no configured key"},
		{name: "negative max ttl", cfg: auth.Config{Keys: []auth.Key{{ID: "k1", Secret: secretA}}, MaxTTL: -time.Second}, want: "max_ttl"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: Validate = %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: Validate = %v, want it to mention %q", tt.name, err, tt.want)
		case err != nil && strings.Contains(err.Error(), secretA):
			t.Errorf("%s: error leaks the secret", tt.name)
		}
	}
}

func split(t *testing.T, tok string) (string, string, string) {
	t.Helper()
	p := strings.Split(tok, ".")
	if len(p) != 3 {
		t.Fatalf("token %q has %d segments", tok, len(p))
	}
	return p[0], p[1], p[2]
}

// flip changes the first character of a base64url string to another valid one.
func flip(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

// TestLongLivedTokenIsRefused: a token signed with a configured key but a lifetime beyond this
// node's max_ttl (issued by a tool or a configuration that allowed five years) is refused.
func TestLongLivedTokenIsRefused(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Now()}
	keys := []auth.Key{{ID: "k1", Secret: secretA}}
	lax, err := auth.NewSigner(auth.Config{Keys: keys, MaxTTL: 5 * 365 * 24 * time.Hour, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	strict, err := auth.NewSigner(auth.Config{Keys: keys, MaxTTL: 720 * time.Hour, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	long, err := lax.Issue(acme, 42, 5*365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := strict.Verify(long); !errors.Is(err, auth.ErrTokenInvalid) {
		t.Fatalf("a correctly signed 5-year token: %v, want ErrTokenInvalid", err)
	}
	if _, err := lax.Verify(long); err != nil {
		t.Fatalf("the signer that allows it: %v", err)
	}
	month, err := lax.Issue(acme, 42, 720*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := strict.Verify(month); err != nil || p.User != 42 {
		t.Fatalf("a token of exactly max_ttl: %+v, %v", p, err)
	}
}

// TestIssuedAtHasMilliseconds: a revocation at 12:00:00.500 must refuse a token issued at
// 12:00:00.250 and accept one issued at 12:00:00.750, so IssuedAt keeps the milliseconds.
func TestIssuedAtHasMilliseconds(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 250_000_000, time.UTC)}
	s := newSigner(t, c, []auth.Key{{ID: "k1", Secret: secretA}}, "")
	tok, err := s.Issue(acme, 42, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if !p.IssuedAt.Equal(c.t) {
		t.Fatalf("IssuedAt = %v, want %v", p.IssuedAt, c.t)
	}
}

// TestIssueFrom: a token issued from a moment before now carries that moment as its issue time
// and expires ttl after it; a moment after now is refused.
func TestIssueFrom(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s := newSigner(t, c, []auth.Key{{ID: "k1", Secret: secretA}}, "")
	from := c.t.Add(-1500 * time.Millisecond)
	tok, err := s.IssueFrom(acme, 42, from, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if !p.IssuedAt.Equal(from) || !p.ExpiresAt.Equal(from.Add(time.Hour).Truncate(time.Second)) {
		t.Fatalf("principal %+v, want issued %v", p, from)
	}
	for _, bad := range []time.Time{{}, c.t.Add(time.Millisecond)} {
		if _, err := s.IssueFrom(acme, 42, bad, time.Hour); err == nil {
			t.Errorf("IssueFrom(%v) issued a token", bad)
		}
	}
}

func TestIssueSession(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s := newSigner(t, c, []auth.Key{{ID: "k1", Secret: secretA}}, "")
	from := c.t.Add(-250 * time.Millisecond)
	tok, err := s.IssueSession(acme, 42, "0194c0de-aaaa-7bbb", from, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Verify(tok)
	if err != nil || p.Session != "0194c0de-aaaa-7bbb" || !p.IssuedAt.Equal(from) || p.User != 42 {
		t.Fatalf("principal %+v, %v", p, err)
	}
	if p, err := s.Verify(mustIssue(t, s)); err != nil || p.Session != "" {
		t.Fatalf("a token without a session: %+v, %v", p, err)
	}
	for _, bad := range []string{"", "a b", "x/y", strings.Repeat("s", 65)} {
		if _, err := s.IssueSession(acme, 42, bad, from, time.Hour); err == nil {
			t.Errorf("IssueSession(%q) issued a token", bad)
		}
	}
}

func mustIssue(t *testing.T, s *auth.Signer) string {
	t.Helper()
	tok, err := s.Issue(acme, 42, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
