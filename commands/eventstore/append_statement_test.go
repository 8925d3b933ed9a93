package eventstore_test

import (
	"errors"
	"testing"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// TestAppendWithStatementWritesBothOrNeither: the hook's statement is written with the events it
// was built from, in their statement; when the stream is not at the expected version neither is
// written; when the statement fails the events are not written either.
func TestAppendWithStatementWritesBothOrNeither(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, pool := newStore(t, eventstore.Config{})
	tenant := domain.MustTenantID("acme")
	if _, err := pool.Exec(ctx, `CREATE TABLE mirror (stream text PRIMARY KEY, version bigint NOT NULL CHECK (version < 3))`); err != nil {
		t.Fatal(err)
	}
	mirror := func(prepared []domain.Envelope) (string, []any, error) {
		last := prepared[len(prepared)-1]
		return `INSERT INTO mirror (stream, version) SELECT $1::text, $2::bigint WHERE EXISTS (SELECT 1 FROM appended)
			ON CONFLICT (stream) DO UPDATE SET version = EXCLUDED.version`, []any{last.StreamID, last.StreamVersion}, nil
	}
	version := func() (v int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM mirror WHERE stream = 'grp1'`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	stored, err := store.AppendWithStatement(ctx, tenant, "grp1", 0, []domain.Envelope{event(tenant, "grp1", 0, ""), event(tenant, "grp1", 0, "")}, mirror)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 2 || stored[1].StreamVersion != 2 || stored[0].Position == 0 || stored[1].Position <= stored[0].Position {
		t.Fatalf("stored = %+v", stored)
	}
	if v := version(); v != 2 {
		t.Fatalf("mirror at %d after two events, want 2", v)
	}

	// A stale expected version: nothing appended, the statement changes nothing.
	_, err = store.AppendWithStatement(ctx, tenant, "grp1", 0, []domain.Envelope{event(tenant, "grp1", 0, "")}, mirror)
	if !errors.Is(err, domain.ErrConcurrency) {
		t.Fatalf("append at a stale version: %v, want ErrConcurrency", err)
	}
	if v := version(); v != 2 {
		t.Fatalf("mirror at %d after a refused append, want 2", v)
	}

	// The statement fails (version 3 breaks its check): the event is not stored.
	if _, err = store.AppendWithStatement(ctx, tenant, "grp1", 2, []domain.Envelope{event(tenant, "grp1", 0, "")}, mirror); err == nil {
		t.Fatal("append whose statement fails: no error")
	}
	last, err := store.LastVersion(ctx, tenant, "grp1")
	if err != nil {
		t.Fatal(err)
	}
	if last != 2 {
		t.Fatalf("stream at %d after an append whose statement failed, want 2", last)
	}
}
