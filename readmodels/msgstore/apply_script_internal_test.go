package msgstore

import (
	"context"
	"errors"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
)

// A batch of sends, read marks and deletions goes to the server as one compound statement and
// leaves what the statement-by-statement way leaves; a redelivery, a recall and a veto are
// handled as Apply always handled them.
func TestScriptedApply(t *testing.T) {
	t.Parallel()
	ctx, r, tenant, db := tenantDB(t)
	scripted, plain := NewStore(r), NewStore(r)
	plain.noScripts.Store(true)
	live, other := DefaultTables(), DefaultTables().WithSuffix("_plain")
	if err := CreateTablesLike(ctx, db, live, other); err != nil {
		t.Fatal(err)
	}
	batch := []domain.Envelope{
		rmtest.Sent(t, tenant, "grp1", 1, 1, "a"), rmtest.Sent(t, tenant, "p2p1_2", 1, 2, "b"),
		rmtest.ReadMarked(t, tenant, "grp1", 3, 1, 1), rmtest.Sent(t, tenant, "grp1", 2, 3, "c"),
		rmtest.Deleted(t, tenant, "grp1", 1, 2), rmtest.ReadMarked(t, tenant, "p2p1_2", 1, 1, 1),
	}
	apply := func(s *Store, tables Tables, events []domain.Envelope, ok func(context.Context) error) int {
		t.Helper()
		n, err := s.ApplyIf(ctx, tenant, "g", tables, events, ok)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := apply(scripted, live, batch, nil); n != 6 || scripted.scripted.Load() != 1 {
		t.Fatalf("scripted apply: %d new, %d scripted batches", n, scripted.scripted.Load())
	}
	apply(plain, other, batch, nil)
	a, _ := scripted.Checksum(ctx, tenant, live)
	b, _ := plain.Checksum(ctx, tenant, other)
	if len(a) != 2 || a["grp1"] != b["grp1"] || a["p2p1_2"] != b["p2p1_2"] {
		t.Fatalf("scripted %+v, plain %+v", a, b)
	}

	// A redelivery is scripted too: its writes change nothing that exists.
	again := append(batch[:1:1], rmtest.Sent(t, tenant, "grp1", 3, 1, "d"))
	if n := apply(scripted, live, again, nil); n != 2 || scripted.scripted.Load() != 2 {
		t.Fatalf("redelivery: %d applied, %d scripted batches", n, scripted.scripted.Load())
	}
	// A recall needs its affected-row count: not scripted.
	if n := apply(scripted, live, []domain.Envelope{rmtest.Recalled(t, tenant, "grp1", 2, 3)}, nil); n != 1 || scripted.scripted.Load() != 2 {
		t.Fatalf("recall: %d applied, %d scripted batches", n, scripted.scripted.Load())
	}
	// A veto rolls the script back and leaves no transaction open on the pooled connection.
	veto := errors.New("veto")
	vetoed := []domain.Envelope{rmtest.Sent(t, tenant, "grp9", 1, 1, "never")}
	if _, err := scripted.ApplyIf(ctx, tenant, "g", live, vetoed, func(context.Context) error { return veto }); err != veto {
		t.Fatalf("vetoed script: %v", err)
	}
	for range 4 {
		var open int
		if err := db.QueryRowContext(ctx, "SELECT @@in_transaction").Scan(&open); err != nil || open != 0 {
			t.Fatalf("pooled connection in a transaction: %d, %v", open, err)
		}
	}
	if n := apply(scripted, live, vetoed, nil); n != 1 || scripted.scripted.Load() != 3 {
		t.Fatalf("after the veto: %d new, %d scripted batches", n, scripted.scripted.Load())
	}
	c, err := scripted.Counts(ctx, tenant, live)
	if err != nil || c.GroupMessages != 4 || c.DirectMessages != 1 || c.Deletions != 1 {
		t.Fatalf("counts %+v, %v", c, err)
	}
}
