package eventstore_test

import (
	"errors"
	"testing"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// Import loads new streams with COPY; a version that is already stored fails the whole import.
func TestImportLoadsNewStreamsAllOrNothing(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t, eventstore.Config{})
	ctx := testCtx(t)
	tenant := domain.MustTenantID("acme")
	var events []domain.Envelope
	for v := int64(1); v <= 3; v++ {
		e, err := domain.NewEnvelope(tenant, "grp1", v, domain.EventGroupMessageSent, domain.Actor{Type: domain.ActorUser, ID: "1"},
			map[string]any{"topic": "grp1", "seq": v})
		if err != nil {
			t.Fatal(err)
		}
		e.IdempotencyKey = "1:c" + string(rune('0'+v))
		e.Actor.KeyID = "k" + string(rune('0'+v))
		events = append(events, e)
	}
	n, err := store.Import(ctx, events)
	if err != nil || n != 3 {
		t.Fatalf("Import = %d, %v", n, err)
	}
	got, err := store.ReadStream(ctx, tenant, "grp1", 0, 0)
	if err != nil || len(got) != 3 || got[2].EventID != events[2].EventID || got[0].IdempotencyKey != events[0].IdempotencyKey ||
		got[1].Actor != events[1].Actor {
		t.Fatalf("ReadStream after Import: %+v %v", got, err)
	}
	more, _ := domain.NewEnvelope(tenant, "grp2", 1, domain.EventGroupMessageSent, domain.Actor{Type: domain.ActorUser, ID: "1"}, map[string]any{})
	if _, err := store.Import(ctx, []domain.Envelope{more, events[1]}); !errors.Is(err, domain.ErrConcurrency) {
		t.Fatalf("importing a stored version: %v, want ErrConcurrency", err)
	}
	if v, _ := store.LastVersion(ctx, tenant, "grp2"); v != 0 {
		t.Errorf("a failed import wrote grp2 up to version %d", v)
	}
}
