package admintrust_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/admintrust"
)

var ops = domain.Actor{Type: domain.ActorAdmin, ID: "ops-7"}

// keyPair generates a producer key of alg and parses both halves.
func keyPair(t *testing.T, alg admintrust.Algorithm, id, scope string, who domain.Actor) (*admintrust.Signer, admintrust.ProducerKey) {
	t.Helper()
	g, err := admintrust.GenerateProducerKey(alg, id, scope, who)
	if err != nil {
		t.Fatal(err)
	}
	s, err := admintrust.ParseSigner(g.Signer)
	if err != nil {
		t.Fatal(err)
	}
	k, err := admintrust.ParseProducerKey(g.Producer)
	if err != nil {
		t.Fatal(err)
	}
	return s, k
}

func headersOf(m map[string]string) admintrust.Headers {
	h := admintrust.Headers{}
	for k, v := range m {
		h[k] = append(h[k], v)
	}
	return h
}

func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, alg := range []admintrust.Algorithm{admintrust.AlgEd25519, admintrust.AlgHMACSHA256} {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			signer, key := keyPair(t, alg, "ops-1", admintrust.PlatformScope, ops)
			other, _ := keyPair(t, alg, "ops-1", admintrust.PlatformScope, ops) // same id, other material
			v, err := admintrust.NewVerifier(5*time.Minute, 10*time.Second, key)
			if err != nil {
				t.Fatal(err)
			}
			recKey, value := []byte("acme:user:42"), []byte(`{"event_id":"x","payload":{}}`)
			good := signer.Sign(recKey, value, now)
			for _, tc := range []struct {
				name  string
				h     admintrust.Headers
				key   []byte
				value []byte
				want  error
			}{
				{"valid", headersOf(good), recKey, value, nil},
				{"no headers", admintrust.Headers{}, recKey, value, admintrust.ErrSignatureRequired},
				{"value changed", headersOf(good), recKey, []byte(`{"event_id":"y","payload":{}}`), admintrust.ErrSignatureInvalid},
				{"record key changed", headersOf(good), []byte("acme:user:43"), value, admintrust.ErrSignatureInvalid},
				{"other key material", headersOf(other.Sign(recKey, value, now)), recKey, value, admintrust.ErrSignatureInvalid},
				{"signed-at changed", func() admintrust.Headers {
					h := headersOf(good)
					h[admintrust.HeaderSignedAt] = []string{admintrust.FormatSignedAt(now.Add(time.Second))}
					return h
				}(), recKey, value, admintrust.ErrSignatureInvalid},
				{"signed-at with a leading zero", func() admintrust.Headers {
					h := headersOf(good)
					h[admintrust.HeaderSignedAt] = []string{"0" + h[admintrust.HeaderSignedAt][0]}
					return h
				}(), recKey, value, admintrust.ErrSignatureInvalid},
				{"signature missing", func() admintrust.Headers {
					h := headersOf(good)
					delete(h, admintrust.HeaderSignature)
					return h
				}(), recKey, value, admintrust.ErrSignatureInvalid},
				{"signature twice", func() admintrust.Headers {
					h := headersOf(good)
					h[admintrust.HeaderSignature] = append(h[admintrust.HeaderSignature], h[admintrust.HeaderSignature][0])
					return h
				}(), recKey, value, admintrust.ErrSignatureInvalid},
				{"unknown key", func() admintrust.Headers {
					h := headersOf(good)
					h[admintrust.HeaderKeyID] = []string{"ops-9"}
					return h
				}(), recKey, value, admintrust.ErrUnknownKey},
				{"too old", headersOf(signer.Sign(recKey, value, now.Add(-5*time.Minute-11*time.Second))), recKey, value, admintrust.ErrStale},
				{"old within the leeway", headersOf(signer.Sign(recKey, value, now.Add(-5*time.Minute-9*time.Second))), recKey, value, nil},
				{"from the future", headersOf(signer.Sign(recKey, value, now.Add(11*time.Second))), recKey, value, admintrust.ErrStale},
				{"future within the leeway", headersOf(signer.Sign(recKey, value, now.Add(9*time.Second))), recKey, value, nil},
			} {
				got, err := v.Verify(tc.h, tc.key, tc.value, now)
				if !errors.Is(err, tc.want) || (err == nil && tc.want != nil) {
					t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
					continue
				}
				if tc.want == nil && (got.ID() != "ops-1" || got.Identity() != (domain.Actor{Type: "admin", ID: "ops-7", KeyID: "ops-1"})) {
					t.Errorf("%s: verified as %v", tc.name, got)
				}
			}
		})
	}
}

func TestBind(t *testing.T) {
	t.Parallel()
	_, platform := keyPair(t, admintrust.AlgEd25519, "plat", admintrust.PlatformScope, ops)
	_, acme := keyPair(t, admintrust.AlgHMACSHA256, "acme-1", "acme", domain.Actor{Type: domain.ActorSystem, ID: "acme-crm"})
	cmd := func(tenant string, actor domain.Actor) domain.AdminCommand {
		return domain.AdminCommand{TenantID: tenant, EventType: string(domain.CmdUserBan), Actor: actor}
	}
	for _, tc := range []struct {
		name     string
		key      admintrust.ProducerKey
		cmd      domain.AdminCommand
		platform bool
		want     error
		actor    domain.Actor
	}{
		{"platform key, any tenant", platform, cmd("globex", ops), false, nil, domain.Actor{Type: "admin", ID: "ops-7", KeyID: "plat"}},
		{"platform key, platform command", platform, cmd("globex", ops), true, nil, domain.Actor{Type: "admin", ID: "ops-7", KeyID: "plat"}},
		{"empty actor takes the identity", platform, cmd("globex", domain.Actor{}), false, nil, domain.Actor{Type: "admin", ID: "ops-7", KeyID: "plat"}},
		{"tenant key, its tenant", acme, cmd("acme", domain.Actor{Type: "system", ID: "acme-crm"}), false, nil,
			domain.Actor{Type: "system", ID: "acme-crm", KeyID: "acme-1"}},
		{"tenant key, another tenant", acme, cmd("globex", domain.Actor{Type: "system", ID: "acme-crm"}), false, admintrust.ErrKeyScope, domain.Actor{}},
		{"tenant key, platform command", acme, cmd("acme", domain.Actor{Type: "system", ID: "acme-crm"}), true, admintrust.ErrKeyScope, domain.Actor{}},
		{"actor of someone else", platform, cmd("acme", domain.Actor{Type: "admin", ID: "root"}), false, admintrust.ErrActorMismatch, domain.Actor{}},
		{"actor of another type", platform, cmd("acme", domain.Actor{Type: "system", ID: "ops-7"}), false, admintrust.ErrActorMismatch, domain.Actor{}},
		{"actor with another key id", platform, cmd("acme", domain.Actor{Type: "admin", ID: "ops-7", KeyID: "old"}), false, admintrust.ErrActorMismatch, domain.Actor{}},
		{"actor with its key id", platform, cmd("acme", domain.Actor{Type: "admin", ID: "ops-7", KeyID: "plat"}), false, nil,
			domain.Actor{Type: "admin", ID: "ops-7", KeyID: "plat"}},
	} {
		got, err := admintrust.Bind(tc.key, tc.cmd, tc.platform)
		if !errors.Is(err, tc.want) || (err == nil && tc.want != nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			continue
		}
		if tc.want == nil && got.Actor != tc.actor {
			t.Errorf("%s: actor %+v, want %+v", tc.name, got.Actor, tc.actor)
		}
	}
	if _, err := admintrust.BindUnsigned(cmd("acme", domain.Actor{Type: "admin", ID: "ops-7", KeyID: "plat"})); !errors.Is(err, admintrust.ErrActorMismatch) {
		t.Errorf("an unsigned command claiming a key id: %v", err)
	}
}

func TestSealAndOpen(t *testing.T) {
	t.Parallel()
	g1, err := admintrust.GenerateSecretsKey("cs-1")
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := admintrust.GenerateSecretsKey("cs-2")
	open1, err := admintrust.ParseOpenKey(g1.Open)
	if err != nil {
		t.Fatal(err)
	}
	open2, _ := admintrust.ParseOpenKey(g2.Open)
	seal1, err := admintrust.ParseSealKey(g1.Seal)
	if err != nil || seal1.Spec() != open1.SealKey().Spec() {
		t.Fatalf("seal key %v does not match its private half", err)
	}
	seal2, _ := admintrust.ParseSealKey(g2.Seal)
	both, _ := admintrust.NewOpener(open1, open2)
	only2, _ := admintrust.NewOpener(open2)

	cmd := domain.AdminCommand{EventID: uuid.Must(uuid.NewV7()), TenantID: "acme", EventType: string(domain.CmdUserResetPassword),
		Payload: json.RawMessage(`{"user_id":"42","PassWord":"correct horse battery"}`)}
	sealedPayload, err := admintrust.SealPayload(seal1, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealedPayload), "correct horse") {
		t.Fatalf("the sealed payload holds the text: %s", sealedPayload)
	}
	var p domain.UserResetPasswordPayload
	if err := json.Unmarshal(sealedPayload, &p); err != nil {
		t.Fatal(err)
	}
	s, ok := p.Password.Sealed()
	if !ok || s.KeyID != "cs-1" || s.Sealed != admintrust.SealSuite {
		t.Fatalf("password not sealed to cs-1: %s", sealedPayload)
	}
	ctx := admintrust.ContextOf(cmd, "password")
	if pt, err := both.Open(ctx, s); err != nil || string(pt) != "correct horse battery" {
		t.Fatalf("open: %q %v", pt, err)
	}
	// Sealing again keeps what is sealed.
	cmd.Payload = sealedPayload
	if again, err := admintrust.SealPayload(seal2, cmd); err != nil || string(again) != string(sealedPayload) {
		t.Fatalf("sealing a sealed payload changed it: %s %v", again, err)
	}
	other := ctx
	other.EventID = uuid.Must(uuid.NewV7())
	for _, tc := range []struct {
		name string
		o    *admintrust.Opener
		c    admintrust.SecretContext
		s    domain.SealedSecret
	}{
		{"the node lacks the key", only2, ctx, s},
		{"another command", both, other, s},
		{"another field", both, admintrust.SecretContext{TenantID: ctx.TenantID, EventType: ctx.EventType, EventID: ctx.EventID, Field: "code"}, s},
		{"another tenant", both, admintrust.SecretContext{TenantID: "globex", EventType: ctx.EventType, EventID: ctx.EventID, Field: ctx.Field}, s},
		{"tampered", both, ctx, func() domain.SealedSecret {
			t, first := s, "A"
			if t.Ciphertext[0] == 'A' {
				first = "B"
			}
			t.Ciphertext = first + t.Ciphertext[1:]
			return t
		}()},
		{"relabelled key", both, ctx, func() domain.SealedSecret { t := s; t.KeyID = "cs-2"; return t }()},
	} {
		if pt, err := tc.o.Open(tc.c, tc.s); !errors.Is(err, admintrust.ErrSecretUnreadable) {
			t.Errorf("%s: opened %q, %v", tc.name, pt, err)
		}
	}
	// Rotation: a secret sealed to the new key opens on a node holding both.
	s2, err := seal2.Seal(ctx, []byte("next"))
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := both.Open(ctx, s2); err != nil || string(pt) != "next" {
		t.Fatalf("open with the second key: %q %v", pt, err)
	}
}

// Parse errors name the key and the field, never key material.
func TestSpecErrorsHideKeyMaterial(t *testing.T) {
	t.Parallel()
	g, _ := admintrust.GenerateProducerKey(admintrust.AlgHMACSHA256, "k1", "acme", ops)
	material := g.Signer[strings.LastIndex(g.Signer, "=")-10:]
	for _, spec := range []string{
		g.Producer + ";bogus=1",
		strings.Replace(g.Producer, "scope=acme", "scope=Not A Tenant", 1),
		strings.Replace(g.Producer, "actor=admin/ops-7", "actor=user/42", 1),
		strings.Replace(g.Producer, "hmac-sha256=", "hmac-sha256=!!", 1),
		strings.Replace(g.Producer, "k1", "", 1),
		g.Producer + ";ed25519=" + material,
		"id=k2;scope=*;actor=ops;hmac-sha256=c2hvcnQ=",
	} {
		_, err := admintrust.ParseProducerKey(spec)
		if err == nil {
			t.Errorf("%q parsed", spec)
			continue
		}
		if strings.Contains(err.Error(), material) || strings.Contains(err.Error(), "c2hvcnQ") {
			t.Errorf("the error shows key material: %v", err)
		}
	}
	if _, err := admintrust.ParseSigner(g.Producer); err == nil {
		t.Error("a producer spec (with a scope) parsed as a signer")
	}
	k, err := admintrust.ParseProducerKey(g.Producer)
	if err != nil || k.Scope() != "acme" || k.Platform() || k.Algorithm() != admintrust.AlgHMACSHA256 || strings.Contains(k.String(), material) {
		t.Fatalf("parsed %v %v", k, err)
	}
	if _, err := admintrust.NewVerifier(time.Minute, 0, k, k); err == nil {
		t.Error("two keys with one id were taken")
	}
}

// The cost a command pays for its signature: the producer signs, the consumer verifies.
func BenchmarkSignVerify(b *testing.B) {
	value := []byte(`{"event_id":"01a2340e-5b6c-7d4e-9f00-1a2b3c4d5e6f","tenant_id":"acme","event_type":"user.ban","version":1,"payload":{"user_id":"42"}}`)
	for _, alg := range []admintrust.Algorithm{admintrust.AlgEd25519, admintrust.AlgHMACSHA256} {
		g, _ := admintrust.GenerateProducerKey(alg, "k1", admintrust.PlatformScope, ops)
		s, _ := admintrust.ParseSigner(g.Signer)
		k, _ := admintrust.ParseProducerKey(g.Producer)
		v, _ := admintrust.NewVerifier(time.Minute, time.Second, k)
		b.Run(string(alg)+"/sign", func(b *testing.B) {
			for b.Loop() {
				s.Sign([]byte("acme:user:42"), value, time.Now())
			}
		})
		h := headersOf(s.Sign([]byte("acme:user:42"), value, time.Now()))
		b.Run(string(alg)+"/verify", func(b *testing.B) {
			for b.Loop() {
				if _, err := v.Verify(h, []byte("acme:user:42"), value, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
