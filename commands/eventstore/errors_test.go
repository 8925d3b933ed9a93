package eventstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

func TestAppendRejectsBadInput(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, _ := newStore(t, eventstore.Config{MaxBatch: 3})
	tenant := domain.MustTenantID("acme")
	bad := func(mut func(*domain.Envelope)) []domain.Envelope {
		e := event(tenant, "s", 1, "")
		mut(&e)
		return []domain.Envelope{e}
	}
	tests := []struct {
		name   string
		stream string
		events []domain.Envelope
		// appendOK: fine for Append, which numbers the events itself.
		// batchOK: fine for AppendBatch, which takes tenant and stream from the events.
		appendOK, batchOK bool
	}{
		{"too many", "s", []domain.Envelope{event(tenant, "s", 1, ""), event(tenant, "s", 2, ""), event(tenant, "s", 3, ""), event(tenant, "s", 4, "")}, false, false},
		{"no event id", "s", bad(func(e *domain.Envelope) { e.EventID = uuid.UUID{} }), false, false},
		{"other tenant", "s", bad(func(e *domain.Envelope) { e.TenantID = domain.MustTenantID("other") }), false, true},
		{"other stream", "s", bad(func(e *domain.Envelope) { e.StreamID = "x" }), false, true},
		{"no stream", "", bad(func(e *domain.Envelope) { e.StreamID = "" }), false, false},
		{"no version", "s", bad(func(e *domain.Envelope) { e.StreamVersion = 0 }), true, false},
		{"no event type", "s", bad(func(e *domain.Envelope) { e.EventType = "" }), false, false},
		{"no time", "s", bad(func(e *domain.Envelope) { e.OccurredAt = time.Time{} }), false, false},
		{"bad payload", "s", bad(func(e *domain.Envelope) { e.Payload = []byte(`{"a":`) }), false, false},
		{"no payload", "s", bad(func(e *domain.Envelope) { e.Payload = nil }), false, false},
	}
	for _, tt := range tests {
		if _, err := store.Append(ctx, tenant, tt.stream, 0, tt.events); !tt.appendOK && !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("%s: Append err = %v, want ErrInvalid", tt.name, err)
		}
		if _, err := store.AppendBatch(ctx, tt.events); !tt.batchOK && !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("%s: AppendBatch err = %v, want ErrInvalid", tt.name, err)
		}
	}
	if _, err := store.Append(ctx, tenant, "s", -1, []domain.Envelope{event(tenant, "s", 0, "")}); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("negative expected version: err = %v, want ErrInvalid", err)
	}
	// Only the three valid calls wrote: acme/s by Append, other/s and acme/x by AppendBatch.
	if n, _ := store.Count(ctx, eventstore.Filter{}); n != 3 {
		t.Fatalf("%d events stored, want 3: a rejected append wrote", n)
	}
}

func TestUnreachableDatabaseIsRetryable(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store, err := eventstore.New(pool, eventstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tenant := domain.MustTenantID("acme")
	_, err = store.Append(ctx, tenant, "s", 0, []domain.Envelope{event(tenant, "s", 0, "")})
	if !errors.Is(err, domain.ErrRetryable) || !strings.HasPrefix(err.Error(), "append events: ") {
		t.Fatalf("Append err = %v, want ErrRetryable starting with the operation", err)
	}
	_, err = store.AppendBatch(ctx, []domain.Envelope{event(tenant, "s", 1, "")})
	if !errors.Is(err, domain.ErrRetryable) {
		t.Fatalf("AppendBatch err = %v, want ErrRetryable", err)
	}
	if _, err := store.ReadCommitted(ctx, eventstore.Cursor{}, 10); !errors.Is(err, domain.ErrRetryable) {
		t.Fatalf("ReadCommitted err = %v, want ErrRetryable", err)
	}
	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	live, _ := newStore(t, eventstore.Config{})
	if _, err := live.LastVersion(expired, tenant, "s"); !errors.Is(err, domain.ErrRetryable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timed-out read err = %v, want ErrRetryable wrapping DeadlineExceeded", err)
	}
}
