package commands_test

import (
	"context"
	"testing"
	"time"

	"github.com/imledger/imledger/commands"
	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

func TestSessionRecorderWritesOpenedAndClosed(t *testing.T) {
	t.Parallel()
	_, store := newPostgres(t, 4)
	rec, err := commands.NewSessionRecorder(store, commands.SessionRecorderConfig{Node: "n1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan struct{})
	go func() { rec.Run(ctx); close(done) }()

	tenant := domain.MustTenantID("sess")
	for i := range 50 {
		sid := "s" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if err := rec.Opened(ctx, tenant, 7, sid, "test-agent"); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := rec.Closed(ctx, tenant, 7, sid, "client_closed"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Stopping flushes what is queued.
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	read := testCtx(t)
	f := eventstore.Filter{Tenant: tenant, EventTypes: []domain.EventType{domain.EventSessionOpened}}
	if n, err := store.Count(read, f); err != nil || n != 50 {
		t.Fatalf("%d opened events (%v), want 50", n, err)
	}
	f.EventTypes = []domain.EventType{domain.EventSessionClosed}
	if n, err := store.Count(read, f); err != nil || n != 25 {
		t.Fatalf("%d closed events (%v), want 25", n, err)
	}
	evs, err := store.ReadStream(read, tenant, domain.SessionStreamID(7, "saa"), 0, 0)
	if err != nil || len(evs) != 2 {
		t.Fatalf("session stream: %d events (%v)", len(evs), err)
	}
	var closed domain.SessionClosed
	if err := evs[1].Decode(&closed); err != nil || closed.Node != "n1" || closed.Reason != "client_closed" || closed.User != 7 {
		t.Fatalf("closed payload %+v (%v)", closed, err)
	}
	if domain.ConversationKey(evs[0].StreamID) != domain.ProfileStreamID(7) {
		t.Fatalf("session events are keyed %q, want the user's key", domain.ConversationKey(evs[0].StreamID))
	}
}
