package passhash_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/imledger/imledger/commands/account/passhash"
	"github.com/imledger/imledger/domain"
)

// cheap keeps the tests fast; production uses DefaultParams.
var cheap = passhash.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

func TestHashAndVerifyPassword(t *testing.T) {
	t.Parallel()
	h, err := passhash.Hash("correct horse battery staple", cheap)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=1024,t=1,p=1$") {
		t.Fatalf("hash %q is not an argon2id PHC string with the given parameters", h)
	}
	h2, _ := passhash.Hash("correct horse battery staple", cheap)
	if h == h2 {
		t.Error("two hashes of one password are equal: the salt is not random")
	}
	tests := []struct {
		name     string
		password string
		want     error
	}{
		{name: "match", password: "correct horse battery staple", want: nil},
		{name: "other password", password: "correct horse battery stapler", want: passhash.ErrMismatch},
		{name: "case differs", password: "Correct horse battery staple", want: passhash.ErrMismatch},
		{name: "empty", password: "", want: passhash.ErrMismatch},
	}
	for _, tt := range tests {
		if err := passhash.Verify(tt.password, h); !errors.Is(err, tt.want) {
			t.Errorf("%s: Verify = %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestDefaultParamsHash(t *testing.T) {
	t.Parallel()
	h, err := passhash.Hash("pw", passhash.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=65536,t=3,p=4$") {
		t.Errorf("hash = %q", h)
	}
	if err := passhash.Verify("pw", h); err != nil {
		t.Error(err)
	}
	if passhash.NeedsRehash(h, passhash.DefaultParams) {
		t.Error("NeedsRehash with the same parameters = true")
	}
	if !passhash.NeedsRehash(h, cheap) {
		t.Error("NeedsRehash with other parameters = false")
	}
}

func TestVerifyPasswordMalformedHash(t *testing.T) {
	t.Parallel()
	good, _ := passhash.Hash("pw", cheap)
	parts := strings.Split(good, "$")
	tests := []struct {
		name string
		hash string
	}{
		{name: "empty", hash: ""},
		{name: "bcrypt", hash: "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy"},
		{name: "argon2i", hash: strings.Replace(good, "argon2id", "argon2i", 1)},
		{name: "version 16", hash: strings.Replace(good, "v=19", "v=16", 1)},
		{name: "huge memory", hash: strings.Replace(good, "m=1024", "m=99999999", 1)},
		{name: "reordered params", hash: strings.Replace(good, "m=1024,t=1,p=1", "t=1,m=1024,p=1", 1)},
		{name: "trailing junk in params", hash: strings.Replace(good, "p=1", "p=1x", 1)},
		{name: "short salt", hash: strings.Join([]string{"", parts[1], parts[2], parts[3], "c2FsdA", parts[5]}, "$")},
		{name: "bad base64", hash: strings.Join([]string{"", parts[1], parts[2], parts[3], parts[4], "!!!"}, "$")},
		{name: "missing hash", hash: strings.Join(parts[:5], "$")},
	}
	for _, tt := range tests {
		if err := passhash.Verify("pw", tt.hash); !errors.Is(err, passhash.ErrMalformed) {
			t.Errorf("%s: Verify = %v, want ErrMalformed", tt.name, err)
		}
		if !passhash.NeedsRehash(tt.hash, cheap) {
			t.Errorf("%s: NeedsRehash = false for a malformed hash", tt.name)
		}
	}
}

func TestHashPasswordRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		password string
		params   passhash.Params
		reason   string // ValidationError reason; empty means a parameter error
	}{
		{name: "empty", password: "", params: cheap, reason: "required"},
		{name: "too long", password: strings.Repeat("x", passhash.MaxPasswordLen+1), params: cheap, reason: "too_long"},
		{name: "zero params", password: "pw"},
		{name: "short key", password: "pw", params: passhash.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 8}},
	}
	for _, tt := range tests {
		_, err := passhash.Hash(tt.password, tt.params)
		var ve *domain.ValidationError
		switch {
		case err == nil:
			t.Errorf("%s: Hash succeeded", tt.name)
		case tt.reason != "" && (!errors.As(err, &ve) || ve.Field != "password" || ve.Reason != tt.reason):
			t.Errorf("%s: Hash = %v, want password/%s", tt.name, err, tt.reason)
		}
	}
}

func TestDummyHash(t *testing.T) {
	t.Parallel()
	h, err := passhash.Dummy(cheap)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=1024,t=1,p=1$") {
		t.Fatalf("dummy hash %q is not an argon2id PHC string with the given parameters", h)
	}
	// Same parameters as a real hash, so verifying against it does the same work.
	if passhash.NeedsRehash(h, cheap) {
		t.Error("NeedsRehash of a dummy hash with its own parameters = true")
	}
	for _, pw := range []string{"", "pw", "correct horse battery staple"} {
		if err := passhash.Verify(pw, h); !errors.Is(err, passhash.ErrMismatch) {
			t.Errorf("Verify(%q, dummy) = %v, want a mismatch", pw, err)
		}
	}
	if h2, _ := passhash.Dummy(cheap); h2 == h {
		t.Error("two dummy hashes are equal: salt and key are not random")
	}
	if _, err := passhash.Dummy(passhash.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 8}); err == nil {
		t.Error("Dummy accepted a key length Hash rejects")
	}
}

// BenchmarkHashAndVerify is one registration's hash and one login's verification at the default
// cost: the CPU a login or a registration spends outside the stores.
func BenchmarkHashAndVerify(b *testing.B) {
	for b.Loop() {
		h, err := passhash.Hash("correct horse battery staple", passhash.DefaultParams)
		if err != nil {
			b.Fatal(err)
		}
		if err := passhash.Verify("correct horse battery staple", h); err != nil {
			b.Fatal(err)
		}
	}
}
