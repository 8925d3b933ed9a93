package eventstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// expectWake fails unless ch delivers within a few seconds.
func expectWake(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatalf("%s: notification channel closed", what)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no notification", what)
	}
}

// expectQuiet fails if ch delivers soon.
func expectQuiet(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s: unexpected notification", what)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestNotificationsFireOnAppend(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	store, pool := newStore(t, eventstore.Config{NotifyChannel: "test_events", ListenMinBackoff: 10 * time.Millisecond})
	acme := domain.MustTenantID("acme")
	ch := store.Notifications(ctx)
	expectWake(t, ch, "listening started")
	expectQuiet(t, ch, "no append yet")

	if _, err := store.Append(ctx, acme, "s", 0, []domain.Envelope{event(acme, "s", 0, "")}); err != nil {
		t.Fatal(err)
	}
	expectWake(t, ch, "Append")

	if _, err := store.AppendBatch(ctx, []domain.Envelope{event(acme, "s", 2, ""), event(acme, "t", 1, "")}); err != nil {
		t.Fatal(err)
	}
	expectWake(t, ch, "AppendBatch")

	if _, err := store.AppendBatch(ctx, []domain.Envelope{event(acme, "s", 1, "")}); err != nil {
		t.Fatal(err)
	}
	expectQuiet(t, ch, "AppendBatch that appended nothing")

	// Kill the listening backend: Listen reconnects and wakes, and later appends wake it again.
	tag, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN %'`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("terminate listener: %v, %d rows", err, tag.RowsAffected())
	}
	expectWake(t, ch, "reconnected")
	if _, err := store.AppendBatch(ctx, []domain.Envelope{event(acme, "s", 3, "")}); err != nil {
		t.Fatal(err)
	}
	expectWake(t, ch, "append after reconnect")

	cancel()
	select {
	case _, ok := <-ch:
		for ok {
			_, ok = <-ch
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed after the context ended")
	}
}
