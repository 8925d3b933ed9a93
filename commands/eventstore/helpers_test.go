package eventstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver for migrations

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/migrations"
)

// testCtx returns a context that ends with the test or after a minute.
func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newStore migrates a fresh database and returns a store over it and its pool.
func newStore(t testing.TB, cfg eventstore.Config) (*eventstore.Store, *pgxpool.Pool) {
	t.Helper()
	ctx := testCtx(t)
	url := testenv.Postgres(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrations.UpPostgres(ctx, db); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store, err := eventstore.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return store, pool
}

// event builds a complete envelope; the stream version is left to the caller.
func event(tenant domain.TenantID, streamID string, version int64, key string) domain.Envelope {
	id := uuid.Must(uuid.NewV7())
	return domain.Envelope{
		EventID:        id,
		TraceID:        "trace-" + id.String()[:8],
		CorrelationID:  "corr-1",
		CausationID:    "cause-1",
		TenantID:       tenant,
		SourceService:  domain.SourceService,
		TargetService:  "push",
		EventType:      "message.group.sent.v1",
		BizType:        "group_message",
		BizID:          fmt.Sprintf("%s:%d", streamID, version),
		IdempotencyKey: key,
		Version:        1,
		OccurredAt:     time.Now().UTC(),
		Actor:          domain.Actor{Type: domain.ActorUser, ID: "42"},
		StreamID:       streamID,
		StreamVersion:  version,
		Payload:        json.RawMessage(fmt.Sprintf(`{"seq": "%d", "text": "hi"}`, version)),
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("bad JSON %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("bad JSON %s: %v", b, err)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}

// assertSameEvent fails unless got is want as stored: every field equal, payload as JSON,
// occurred_at to the microsecond.
func assertSameEvent(t testing.TB, got, want domain.Envelope) {
	t.Helper()
	if !jsonEqual(t, got.Payload, want.Payload) {
		t.Errorf("payload = %s, want %s", got.Payload, want.Payload)
	}
	if !got.OccurredAt.Equal(want.OccurredAt.Truncate(time.Microsecond)) || got.OccurredAt.Location() != time.UTC {
		t.Errorf("occurred_at = %v, want %v in UTC", got.OccurredAt, want.OccurredAt)
	}
	if (got.ParentEventID == nil) != (want.ParentEventID == nil) ||
		(got.ParentEventID != nil && *got.ParentEventID != *want.ParentEventID) {
		t.Errorf("parent_event_id = %v, want %v", got.ParentEventID, want.ParentEventID)
	}
	g, w := got, want
	g.Payload, w.Payload = nil, nil
	g.OccurredAt, w.OccurredAt = time.Time{}, time.Time{}
	g.ParentEventID, w.ParentEventID = nil, nil
	if g.Position == 0 {
		t.Errorf("position not set")
	}
	if w.Position == 0 {
		w.Position = g.Position
	}
	gj, _ := json.Marshal(g)
	wj, _ := json.Marshal(w)
	if string(gj) != string(wj) {
		t.Errorf("event differs:\n got  %s\n want %s", gj, wj)
	}
}

// insertRaw writes e with plain SQL in tx, the way another writer would: its keys, then the row.
func insertRaw(t testing.TB, tx pgx.Tx, e domain.Envelope) {
	t.Helper()
	_, err := tx.Exec(context.Background(), `INSERT INTO event_keys (tenant_id, stream_id, stream_version, event_id)
		VALUES ($1, $2, $3, $4)`, e.TenantID.String(), e.StreamID, e.StreamVersion, e.EventID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(context.Background(), `INSERT INTO events (event_id, tenant_id, stream_id, stream_version,
		event_type, version, occurred_at, payload) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		e.EventID, e.TenantID.String(), e.StreamID, e.StreamVersion, string(e.EventType), e.Version, e.OccurredAt, []byte(e.Payload))
	if err != nil {
		t.Fatal(err)
	}
}
