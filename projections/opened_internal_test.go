package projections

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
)

// stubOpener opens every sealed value as the JSON string "plain", or fails with err.
type stubOpener struct{ err error }

func (o stubOpener) Open(context.Context, domain.TenantID, domain.Sealed) ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	return []byte(`"plain"`), nil
}

func TestOpenAllOpensOnlySealedEventsAndRetriesFailures(t *testing.T) {
	t.Parallel()
	tok := domain.Sealed{Kind: domain.SealContent, Key: domain.DataKeyRef{User: 7, Month: "2026-01"}, Nonce: []byte{1}, Ciphertext: []byte{2}}.String()
	events := []domain.Envelope{
		{EventID: uuid.New(), Payload: []byte(`{"content":"clear"}`)},
		{EventID: uuid.New(), Payload: []byte(`{"content":"` + tok + `"}`)},
	}
	out, err := openAll(context.Background(), events, stubOpener{})
	if err != nil {
		t.Fatal(err)
	}
	if string(out[0].Payload) != `{"content":"clear"}` || string(out[1].Payload) != `{"content":"plain"}` {
		t.Fatalf("opened %s, %s", out[0].Payload, out[1].Payload)
	}
	if string(events[1].Payload) == string(out[1].Payload) {
		t.Fatal("the caller's events were changed in place")
	}
	clear := events[:1]
	if same, _ := openAll(context.Background(), clear, stubOpener{}); &same[0] != &clear[0] {
		t.Fatal("events without sealed values were copied")
	}
	down := errors.New("key store down")
	if _, err := openAll(context.Background(), events, stubOpener{err: down}); !errors.Is(err, down) || !isTransient(err) {
		t.Fatalf("a failing opener: %v, want it transient and wrapped", err)
	}
	if _, err := openAll(context.Background(), events, stubOpener{err: domain.ErrKeyErased}); err != nil {
		t.Fatalf("an erased key failed the batch: %v", err)
	}
}
