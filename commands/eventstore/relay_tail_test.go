package eventstore_test

import (
	"testing"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// TestReadCommittedWaitsForOpenTransactions holds a writer's transaction open while a later one
// commits: the tail must return neither, then both in (tx_id, position) order once the first
// commits, so a cursor saved in between never skips the late commit.
func TestReadCommittedWaitsForOpenTransactions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// insertFirst: the open transaction inserts before the other append, so its event has
		// the lower position; otherwise it only takes its transaction id first and inserts
		// after the other append committed, so its event has the higher position.
		insertFirst bool
	}{
		{"open transaction holds the lower position", true},
		{"open transaction holds the higher position", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			store, pool := newStore(t, eventstore.Config{})
			acme := domain.MustTenantID("acme")
			if c, err := store.LastCursor(ctx); err != nil || c != (eventstore.Cursor{}) {
				t.Fatalf("LastCursor of an empty store = %+v, %v; want the zero cursor", c, err)
			}

			early, err := store.Append(ctx, acme, "early", 0, []domain.Envelope{event(acme, "early", 0, "")})
			if err != nil {
				t.Fatal(err)
			}
			recs := readCommittedUntil(t, store, eventstore.Cursor{}, 1)
			if len(recs) != 1 || recs[0].Envelope.EventID != early[0].EventID {
				t.Fatalf("first read = %d records, want the early event", len(recs))
			}
			cursor := recs[0].Cursor
			if cursor.TxID == 0 || cursor.Position != early[0].Position {
				t.Fatalf("cursor = %+v", cursor)
			}

			slow := event(acme, "slow", 1, "")
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if tt.insertFirst {
				insertRaw(t, tx, slow)
			} else if _, err := tx.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
				t.Fatal(err)
			}
			fast, err := store.Append(ctx, acme, "fast", 0, []domain.Envelope{event(acme, "fast", 0, "")})
			if err != nil {
				t.Fatal(err)
			}
			if !tt.insertFirst {
				insertRaw(t, tx, slow)
			}

			recs, err = store.ReadCommitted(ctx, cursor, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 0 {
				t.Fatalf("read %d records while an older transaction is open, want 0 (first: %s)", len(recs), recs[0].Envelope.StreamID)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}

			recs = readCommittedUntil(t, store, cursor, 2)
			if len(recs) != 2 || recs[0].Envelope.EventID != slow.EventID || recs[1].Envelope.EventID != fast[0].EventID {
				t.Fatalf("after commit read %d records, want the slow then the fast event", len(recs))
			}
			slowPos, fastPos := recs[0].Envelope.Position, recs[1].Envelope.Position
			if tt.insertFirst != (slowPos < fastPos) {
				t.Fatalf("positions slow %d fast %d do not match the scenario", slowPos, fastPos)
			}
			if !(recs[0].Cursor.TxID < recs[1].Cursor.TxID && recs[0].Cursor.TxID > cursor.TxID) {
				t.Fatalf("cursors out of order: %+v then %+v after %+v", recs[0].Cursor, recs[1].Cursor, cursor)
			}
			assertSameEvent(t, recs[1].Envelope, fast[0])

			// The last cursor is the fast event's, also when the slow one holds the highest
			// position: a relay that waited for that position would wait forever.
			last, err := store.LastCursor(ctx)
			if err != nil || last != recs[1].Cursor {
				t.Fatalf("LastCursor = %+v, %v; want the fast event's %+v", last, err, recs[1].Cursor)
			}
			if !cursor.Before(last) || !recs[0].Cursor.Before(last) || last.Before(recs[1].Cursor) || last.Before(last) {
				t.Fatalf("Before disagrees with the read order: %+v, %+v, %+v", cursor, recs[0].Cursor, last)
			}
			if !tt.insertFirst && last.Position >= slowPos {
				t.Fatalf("last cursor position %d, want below the slow event's %d", last.Position, slowPos)
			}

			rest, err := store.ReadCommitted(ctx, recs[1].Cursor, 10)
			if err != nil || len(rest) != 0 {
				t.Fatalf("read past the end = %d records, %v", len(rest), err)
			}
		})
	}
}

func TestReadCommittedPagesVisitEveryEventOnce(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, _ := newStore(t, eventstore.Config{})
	acme := domain.MustTenantID("acme")
	var batch []domain.Envelope
	for v := int64(1); v <= 25; v++ {
		batch = append(batch, event(acme, "a", v, ""), event(acme, "b", v, ""))
	}
	for i := 0; i < len(batch); i += 10 {
		if _, err := store.AppendBatch(ctx, batch[i:i+10]); err != nil {
			t.Fatal(err)
		}
	}
	waitCommittedVisible(t, store, len(batch))
	seen := map[[16]byte]bool{}
	var cursor eventstore.Cursor
	for pages := 0; ; pages++ {
		recs, err := store.ReadCommitted(ctx, cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		if len(recs) > 7 || pages > 20 {
			t.Fatalf("page of %d records, page %d", len(recs), pages)
		}
		for _, r := range recs {
			if seen[r.Envelope.EventID] {
				t.Fatalf("event %s read twice", r.Envelope.EventID)
			}
			seen[r.Envelope.EventID] = true
		}
		cursor = recs[len(recs)-1].Cursor
	}
	if len(seen) != len(batch) {
		t.Fatalf("read %d events, want %d", len(seen), len(batch))
	}
}

// TestCheckpointFromReadCommitted saves a cursor taken from the tail and reads on from it after
// loading it back, the relay's restart path.
func TestCheckpointFromReadCommitted(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, pool := newStore(t, eventstore.Config{})
	acme := domain.MustTenantID("acme")
	for v := int64(1); v <= 3; v++ {
		if _, err := store.AppendBatch(ctx, []domain.Envelope{event(acme, "s", v, "")}); err != nil {
			t.Fatal(err)
		}
	}
	waitCommittedVisible(t, store, 3)
	recs, err := store.ReadCommitted(ctx, eventstore.Cursor{}, 2)
	if err != nil || len(recs) != 2 {
		t.Fatalf("read = %d, %v", len(recs), err)
	}
	term, err := store.BeginRelayTerm(ctx, "relay")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SaveRelayProgress(ctx, "relay", term.Term, recs[1].Cursor, nil); err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := pool.QueryRow(ctx, "SELECT tx_id::text FROM relay_checkpoints WHERE name = 'relay'").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	var txText string
	if err := pool.QueryRow(ctx, "SELECT tx_id::text FROM events WHERE position = $1", recs[1].Envelope.Position).Scan(&txText); err != nil {
		t.Fatal(err)
	}
	if stored != txText {
		t.Fatalf("stored checkpoint tx %s, event tx %s", stored, txText)
	}
	c, err := store.LoadCheckpoint(ctx, "relay")
	if err != nil {
		t.Fatal(err)
	}
	rest, err := store.ReadCommitted(ctx, c, 10)
	if err != nil || len(rest) != 1 || rest[0].Envelope.StreamVersion != 3 {
		t.Fatalf("read after checkpoint = %d records, %v; want version 3 only", len(rest), err)
	}
}

// The tail's horizon is the oldest transaction running anywhere in the PostgreSQL cluster, so
// other tests (and other packages' tests) holding transactions open delay it. These helpers wait
// for committed events to pass the horizon instead of assuming they already have.

// readCommittedUntil reads from cursor until at least n records are visible, and returns what
// one read from cursor then returns.
func readCommittedUntil(t testing.TB, store *eventstore.Store, cursor eventstore.Cursor, n int) []eventstore.Record {
	t.Helper()
	ctx := testCtx(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		recs, err := store.ReadCommitted(ctx, cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) >= n || time.Now().After(deadline) {
			return recs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCommittedVisible waits until the tail shows n events from the start.
func waitCommittedVisible(t testing.TB, store *eventstore.Store, n int) {
	t.Helper()
	if recs := readCommittedUntil(t, store, eventstore.Cursor{}, n); len(recs) < n {
		t.Fatalf("only %d of %d committed events became visible to the tail", len(recs), n)
	}
}
