package domain_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

// fakeBox seals by reversing bytes: pure logic for the payload walk, not cryptography.
type fakeBox struct {
	erased map[domain.UserID]bool
	fail   error
}

func (f fakeBox) Seal(_ context.Context, _ domain.TenantID, author domain.UserID, at time.Time, kind domain.SealKind, plain []byte) (string, error) {
	ct := []byte(string(plain))
	for i, j := 0, len(ct)-1; i < j; i, j = i+1, j-1 {
		ct[i], ct[j] = ct[j], ct[i]
	}
	return domain.Sealed{Kind: kind, Key: domain.DataKeyRef{User: author, Month: domain.KeyMonth(at)}, Nonce: []byte("nonce"), Ciphertext: ct}.String(), nil
}

func (f fakeBox) Open(_ context.Context, _ domain.TenantID, s domain.Sealed) ([]byte, error) {
	if f.fail != nil {
		return nil, f.fail
	}
	if f.erased[s.Key.User] {
		return nil, domain.ErrKeyErased
	}
	ct := []byte(string(s.Ciphertext))
	for i, j := 0, len(ct)-1; i < j; i, j = i+1, j-1 {
		ct[i], ct[j] = ct[j], ct[i]
	}
	return ct, nil
}

func TestOpenPayloadRoundTripAndErasure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tenant, _ := domain.NewTenantID("acme")
	at := time.Date(2026, 3, 31, 23, 0, 0, 0, time.UTC)
	box := fakeBox{}
	content, err := domain.SealContentRaw(ctx, box, tenant, 7, at, json.RawMessage(`{"text":"hello \"world\""}`))
	if err != nil {
		t.Fatal(err)
	}
	nick, err := domain.SealString(ctx, box, tenant, 7, at, "Zoë")
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{"content": content, "nickname": nick, "other": `\"$enc:v1:plain`, "seq": "3"})
	if strings.Contains(string(payload), "hello") || strings.Contains(string(payload), "Zoë") {
		t.Fatalf("plaintext in sealed payload: %s", payload)
	}
	if !strings.Contains(nick, ":7:2026-03:") {
		t.Fatalf("token %q does not name key 7/2026-03", nick)
	}
	open, err := domain.OpenPayload(ctx, tenant, payload, box)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Content  json.RawMessage `json:"content"`
		Nickname string          `json:"nickname"`
		Other    string          `json:"other"`
	}
	if err := json.Unmarshal(open, &got); err != nil {
		t.Fatalf("opened payload %s: %v", open, err)
	}
	if string(got.Content) != `{"text":"hello \"world\""}` || got.Nickname != "Zoë" || got.Other != `\"$enc:v1:plain` {
		t.Fatalf("opened %+v", got)
	}
	erased := fakeBox{erased: map[domain.UserID]bool{7: true}}
	open, err = domain.OpenPayload(ctx, tenant, payload, erased)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(open, &got); err != nil {
		t.Fatal(err)
	}
	if string(got.Content) != string(domain.ErasedContent) || got.Nickname != domain.ErasedText {
		t.Fatalf("erased read %+v", got)
	}
	down := errors.New("key store down")
	if _, err := domain.OpenPayload(ctx, tenant, payload, fakeBox{fail: down}); !errors.Is(err, down) {
		t.Fatalf("a failing opener: %v, want it wrapped", err)
	}
}

func TestParseSealedRefusesMalformed(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{"", "$enc:v1:", "$enc:v1:x:7:2026-03:AA:AA", "$enc:v1:j:0:2026-03:AA:AA",
		"$enc:v1:j:7:2026-13:AA:AA", "$enc:v1:j:7:2026-03:A+:AA", "$enc:v1:j:7:2026-03:AA",
		"$enc:v1:j:7:2026-00:AA:AA", "$enc:v1:j:7:2026-3:AA:AA", "$enc:v1:j:7:20x6-03:AA:AA", "$enc:v1:j:7:2026/03:AA:AA",
		"$enc:v1:j:7:2026-03:AA:AA:AA", "$enc:v1:jj:7:2026-03:AA:AA"} {
		if _, ok := domain.ParseSealed(tok); ok {
			t.Errorf("ParseSealed(%q) accepted", tok)
		}
	}
	s := domain.Sealed{Kind: domain.SealText, Key: domain.DataKeyRef{User: 9, Month: "2026-01"}, Nonce: []byte{1, 2}, Ciphertext: []byte{3}}
	back, ok := domain.ParseSealed(s.String())
	if !ok || back.Key != s.Key || back.Kind != s.Kind || string(back.Nonce) != string(s.Nonce) {
		t.Fatalf("round trip of %s: %+v %v", s, back, ok)
	}
}

func TestPatchKeepsSealedFieldsUnchecked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tenant, _ := domain.NewTenantID("acme")
	nick, _ := domain.SealString(ctx, fakeBox{}, tenant, 7, time.Now(), "a nickname of thirty-two chars!!")
	st, err := domain.NewProfileState(tenant, 7)
	if err != nil {
		t.Fatal(err)
	}
	env, err := domain.NewEnvelope(tenant, domain.ProfileStreamID(7), 1, domain.EventUserProfileUpdated,
		domain.Actor{Type: domain.ActorUser, ID: "7"}, &domain.UserProfileUpdated{User: 7, Nickname: nick})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(env); err != nil {
		t.Fatal(err)
	}
	sig := "new signature"
	events, err := st.Patch(domain.Principal{Tenant: tenant, User: 7}, domain.ProfilePatch{Signature: &sig}, time.Now())
	if err != nil {
		t.Fatalf("patch over a sealed nickname: %v", err)
	}
	p := events[0].Payload.(*domain.UserProfileUpdated)
	if p.Nickname != nick || p.Signature != sig {
		t.Fatalf("patched profile %+v", p)
	}
	long := strings.Repeat("x", 40)
	if _, err := st.Patch(domain.Principal{Tenant: tenant, User: 7}, domain.ProfilePatch{Nickname: &long}, time.Now()); err == nil {
		t.Fatal("a too long nickname was accepted")
	}
}
