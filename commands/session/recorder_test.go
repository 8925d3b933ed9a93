package session_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/session"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

func TestRecorderWritesOpenedAndClosed(t *testing.T) {
	t.Parallel()
	_, store := storetest.EventStore(t, 4)
	rec, err := session.NewRecorder(store, session.RecorderConfig{Node: "n1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testenv.Context(t))
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
	read := testenv.Context(t)
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

// TestRecorderLosesOnlyTheEventsPostgresRefuses queues one batch of session events in
// which one event is refused by PostgreSQL for good (a stream id with NUL) and one carries a user
// agent with NUL (refused by jsonb unless cleaned): every other event of the batch is written,
// the user agent without its NUL, and only the refused event is lost.
func TestRecorderLosesOnlyTheEventsPostgresRefuses(t *testing.T) {
	t.Parallel()
	_, store := storetest.EventStore(t, 4)
	rec, err := session.NewRecorder(store, session.RecorderConfig{Node: "n1", RetryInterval: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testenv.Context(t))
	tenant := domain.MustTenantID("sessbad")
	const sessions = 40
	// Queued before Run starts, so they go in one batch.
	for i := range sessions {
		sid, ua := fmt.Sprintf("s%02d", i), "agent"
		switch i {
		case 7:
			sid = "bad\x00id"
		case 21:
			ua = "evil\x00ua"
		}
		if err := rec.Opened(ctx, tenant, 7, sid, ua); err != nil {
			t.Fatal(err)
		}
		if err := rec.Closed(ctx, tenant, 7, sid, "client_closed"); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { rec.Run(ctx); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	read := testenv.Context(t)
	for _, typ := range []domain.EventType{domain.EventSessionOpened, domain.EventSessionClosed} {
		n, err := store.Count(read, eventstore.Filter{Tenant: tenant, EventTypes: []domain.EventType{typ}})
		if err != nil || n != sessions-1 {
			t.Fatalf("%d %s events (%v), want %d: only the refused session's are lost", n, typ, err, sessions-1)
		}
	}
	evs, err := store.ReadStream(read, tenant, domain.SessionStreamID(7, "s21"), 0, 0)
	if err != nil || len(evs) != 2 {
		t.Fatalf("session s21: %d events (%v)", len(evs), err)
	}
	var opened domain.SessionOpened
	if err := evs[0].Decode(&opened); err != nil || opened.UserAgent != "evilua" {
		t.Fatalf("opened payload %+v (%v), want user agent %q", opened, err, "evilua")
	}
}
