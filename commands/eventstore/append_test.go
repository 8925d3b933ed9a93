package eventstore_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

func TestAppendReadRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, _ := newStore(t, eventstore.Config{})
	tenant := domain.MustTenantID("acme")

	first := event(tenant, "grp1", 0, "client-1")
	first.Payload = []byte(`{"z": [1, 2, {"b": null}], "a": "\u00e9\u4f60", "n": 12345678901234567}`)
	parent := uuid.Must(uuid.NewV7())
	second := event(domain.TenantID{}, "", 0, "") // tenant and stream come from Append
	second.ParentEventID = &parent
	second.Actor = domain.Actor{Type: domain.ActorAdmin, ID: "ops", KeyID: "ops-2026"}
	second.OccurredAt = time.Date(2024, 2, 29, 23, 59, 59, 123456789, time.FixedZone("x", 8*3600))

	appended, err := store.Append(ctx, tenant, "grp1", 0, []domain.Envelope{first, second})
	if err != nil {
		t.Fatal(err)
	}
	if len(appended) != 2 || appended[0].StreamVersion != 1 || appended[1].StreamVersion != 2 {
		t.Fatalf("appended versions = %+v", appended)
	}
	if appended[0].Position == 0 || appended[1].Position <= appended[0].Position {
		t.Fatalf("positions = %d, %d", appended[0].Position, appended[1].Position)
	}
	if appended[1].TenantID != tenant || appended[1].StreamID != "grp1" {
		t.Fatalf("tenant/stream not filled in: %+v", appended[1])
	}

	read, err := store.ReadStream(ctx, tenant, "grp1", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != 2 {
		t.Fatalf("read %d events, want 2", len(read))
	}
	for i := range read {
		assertSameEvent(t, read[i], appended[i])
	}
	if read[0].ParentEventID != nil || read[1].ParentEventID == nil || *read[1].ParentEventID != parent {
		t.Fatalf("parent ids = %v, %v", read[0].ParentEventID, read[1].ParentEventID)
	}
	// The bulk reader (exports, republish) reads the actor's key id too. Its horizon waits for
	// every transaction of the cluster, other tests' too.
	var scanned []domain.Envelope
	for deadline := time.Now().Add(20 * time.Second); len(scanned) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		horizon, err := store.Horizon(ctx)
		if err != nil {
			t.Fatal(err)
		}
		scanned = scanned[:0]
		if err := store.ScanCommitted(ctx, eventstore.Range{Horizon: horizon}, eventstore.Filter{Tenant: tenant}, 10, func(recs []eventstore.Record) error {
			for _, r := range recs {
				scanned = append(scanned, r.Envelope)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(scanned) != 2 || scanned[0].Actor != first.Actor || scanned[1].Actor != second.Actor {
		t.Fatalf("scanned actors %+v, want %+v and %+v", scanned, first.Actor, second.Actor)
	}
	if read[1].OccurredAt.Nanosecond() != 123456000 {
		t.Fatalf("occurred_at = %v, want microsecond precision", read[1].OccurredAt)
	}

	after, err := store.ReadStream(ctx, tenant, "grp1", 1, 10)
	if err != nil || len(after) != 1 || after[0].StreamVersion != 2 {
		t.Fatalf("ReadStream after 1 = %v, %v", after, err)
	}
	last, err := store.LastVersion(ctx, tenant, "grp1")
	if err != nil || last != 2 {
		t.Fatalf("LastVersion = %d, %v; want 2", last, err)
	}
	if v, err := store.LastVersion(ctx, tenant, "empty"); err != nil || v != 0 {
		t.Fatalf("LastVersion of empty stream = %d, %v", v, err)
	}
	found, err := store.FindByIdempotencyKey(ctx, tenant, "grp1", "client-1")
	if err != nil {
		t.Fatal(err)
	}
	assertSameEvent(t, found, appended[0])
	for _, key := range []string{"client-2", ""} {
		if _, err := store.FindByIdempotencyKey(ctx, tenant, "grp1", key); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("FindByIdempotencyKey(%q) = %v, want ErrNotFound", key, err)
		}
	}
	if _, err := store.FindByIdempotencyKey(ctx, domain.MustTenantID("other"), "grp1", "client-1"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("another tenant sees the key: %v", err)
	}
}

func TestAppendExpectedVersionConflicts(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, _ := newStore(t, eventstore.Config{})
	tenant := domain.MustTenantID("acme")
	if _, err := store.Append(ctx, tenant, "s", 0, []domain.Envelope{event(tenant, "s", 0, "k1"), event(tenant, "s", 0, "")}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		expected int64
		events   []domain.Envelope
	}{
		{"stream ahead of expected", 1, []domain.Envelope{event(tenant, "s", 0, "")}},
		{"stream behind expected", 5, []domain.Envelope{event(tenant, "s", 0, "")}},
		{"expected an empty stream", 0, []domain.Envelope{event(tenant, "s", 0, "")}},
		{"idempotency key stored", 2, []domain.Envelope{event(tenant, "s", 0, "k1")}},
	}
	for _, tt := range tests {
		_, err := store.Append(ctx, tenant, "s", tt.expected, tt.events)
		if !errors.Is(err, domain.ErrConcurrency) {
			t.Fatalf("%s: err = %v, want ErrConcurrency", tt.name, err)
		}
		if !strings.HasPrefix(err.Error(), "append events: stream acme/s") {
			t.Fatalf("%s: error does not start with the operation and stream: %q", tt.name, err)
		}
	}
	if v, _ := store.LastVersion(ctx, tenant, "s"); v != 2 {
		t.Fatalf("a failed append wrote: last version %d, want 2", v)
	}
	if _, err := store.Append(ctx, tenant, "s", 2, []domain.Envelope{event(tenant, "s", 0, "")}); err != nil {
		t.Fatalf("append at the right version: %v", err)
	}
}

// TestAppendVersionTakenByConcurrentTx makes the unique index, not the version check, reject an
// append: another transaction inserted the version but has not committed when Append runs.
func TestAppendVersionTakenByConcurrentTx(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, pool := newStore(t, eventstore.Config{})
	tenant := domain.MustTenantID("acme")

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	insertRaw(t, tx, event(tenant, "s", 1, ""))

	done := make(chan error, 1)
	go func() {
		_, err := store.Append(ctx, tenant, "s", 0, []domain.Envelope{event(tenant, "s", 0, "")})
		done <- err
	}()
	// Commit only once Append waits on the other transaction's row lock: committing earlier, on
	// a slow machine, lets Append's version check see version 1, and the index is never asked.
	for blocked := false; !blocked; {
		select {
		case err := <-done:
			t.Fatalf("Append returned before the other transaction ended: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&blocked); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if !errors.Is(err, domain.ErrConcurrency) || !strings.Contains(err.Error(), "versions 1..1 already taken") {
		t.Fatalf("err = %v, want ErrConcurrency naming the taken version", err)
	}
}

func TestAppendRace(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, _ := newStore(t, eventstore.Config{})
	tenant := domain.MustTenantID("acme")
	if _, err := store.Append(ctx, tenant, "race", 0, []domain.Envelope{event(tenant, "race", 0, "")}); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		errs    = make(chan error, n)
		winners = make(chan domain.Envelope, n)
	)
	for range n {
		wg.Go(func() {
			<-start
			out, err := store.Append(ctx, tenant, "race", 1, []domain.Envelope{event(tenant, "race", 0, ""), event(tenant, "race", 0, "")})
			if err != nil {
				errs <- err
				return
			}
			winners <- out[1]
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	close(winners)
	if len(winners) != 1 {
		t.Fatalf("%d appends won, want exactly 1", len(winners))
	}
	for err := range errs {
		if !errors.Is(err, domain.ErrConcurrency) {
			t.Fatalf("loser err = %v, want ErrConcurrency", err)
		}
	}
	won := <-winners
	read, err := store.ReadStream(ctx, tenant, "race", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != 3 || read[2].EventID != won.EventID || won.StreamVersion != 3 {
		t.Fatalf("stream holds %d events, last %v; want 3 ending with the winner's", len(read), read[len(read)-1].EventID)
	}
}
