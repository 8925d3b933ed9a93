package projections

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/internal/testenv"
)

// TestOpenWatch: a group found without open dead letters is trusted to have none, with no lookup,
// until this process records one or its partitions move; a group found with some is looked at
// again as a whole only every openRecheck, so a resolution elsewhere is learnt within it.
func TestOpenWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := EnsureSchema(ctx, pool); err != nil {
		t.Fatal(err)
	}
	parking := parkingStore{pool: pool}
	const group = "watched"
	var w openWatch
	none := func(what string, want bool) {
		t.Helper()
		got, err := w.none(ctx, parking, group)
		if err != nil || got != want {
			t.Fatalf("%s: none = %v, %v; want %v", what, got, err, want)
		}
	}
	none("a group without dead letters", true)
	// A dead letter this process was not told of (as no member could open for a partition it
	// consumes) is not looked for: the watch answers from what it knows.
	id, _, err := parking.recordDeadLetter(ctx, DeadLetter{ConsumerGroup: group, TenantID: "acme", ConversationKey: "grp1",
		EventID: "e1", Reason: ReasonBadEvent, Payload: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	none("trusted, with no lookup", true)
	w.invalidate() // a new consumer group session, or the sink about to record one
	none("after the partitions moved", false)
	if _, err := pool.Exec(ctx, `UPDATE projection_dead_letters SET status = 'replayed', resolved_at = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	none("resolved elsewhere, within openRecheck", false)
	w.mu.Lock()
	w.checked = time.Now().Add(-openRecheck)
	w.mu.Unlock()
	none("resolved elsewhere, after openRecheck", true)

	// The sink tells the watch before it records a dead letter and again once it has: a lookup
	// that ran in between found no row, and the second word makes the watch forget it.
	w.invalidate()
	none("a lookup while the sink writes its row", true)
	if _, _, err := parking.recordDeadLetter(ctx, DeadLetter{ConsumerGroup: group, TenantID: "acme", ConversationKey: "grp2",
		EventID: "e2", Reason: ReasonBadEvent, Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	w.invalidate()
	none("once the row is written", false)
}
