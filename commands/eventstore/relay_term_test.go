package eventstore_test

import (
	"errors"
	"testing"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// Each BeginRelayTerm fences the terms before it: a deposed relay can neither move the checkpoint
// nor start a republish, and what it tried leaves no trace.
func TestStaleTermIsRefused(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, _ := newStore(t, eventstore.Config{})
	if c, err := store.LoadCheckpoint(ctx, "relay"); err != nil || c != (eventstore.Cursor{}) {
		t.Fatalf("missing checkpoint = %+v, %v; want the zero cursor", c, err)
	}
	first, err := store.BeginRelayTerm(ctx, "relay")
	if err != nil {
		t.Fatal(err)
	}
	if first.Term != 1 || first.Checkpoint != (eventstore.Cursor{}) || first.Republish != nil || first.ClusterID != "" {
		t.Fatalf("first term = %+v", first)
	}
	c1 := eventstore.Cursor{TxID: 750, Position: 12}
	off := []eventstore.PartitionOffset{{Topic: "t", Partition: 3, Next: 10}}
	if err := store.SaveRelayProgress(ctx, "relay", first.Term, c1, off); err != nil {
		t.Fatal(err)
	}

	second, err := store.BeginRelayTerm(ctx, "relay")
	if err != nil {
		t.Fatal(err)
	}
	if second.Term != 2 || second.Checkpoint != c1 || len(second.Offsets) != 1 || second.Offsets[0] != off[0] {
		t.Fatalf("second term = %+v, want term 2 from %+v with %+v", second, c1, off)
	}
	ahead := eventstore.Cursor{TxID: 900, Position: 40}
	err = store.SaveRelayProgress(ctx, "relay", first.Term, ahead, []eventstore.PartitionOffset{{Topic: "t", Partition: 3, Next: 99}})
	if !errors.Is(err, eventstore.ErrStaleTerm) || !errors.Is(err, domain.ErrConcurrency) {
		t.Fatalf("save with a stale term = %v, want ErrStaleTerm", err)
	}
	if err := store.StartRepublish(ctx, "relay", first.Term, "other", true); !errors.Is(err, eventstore.ErrStaleTerm) {
		t.Fatalf("republish with a stale term = %v, want ErrStaleTerm", err)
	}
	third, err := store.BeginRelayTerm(ctx, "relay")
	if err != nil {
		t.Fatal(err)
	}
	if third.Checkpoint != c1 || third.Offsets[0].Next != 10 || third.Republish != nil || third.ClusterID != "" {
		t.Fatalf("a stale term's writes took effect: %+v", third)
	}
	// Terms are per name.
	if other, err := store.BeginRelayTerm(ctx, "other"); err != nil || other.Term != 1 {
		t.Fatalf("another relay's first term = %+v, %v", other, err)
	}
}

// The checkpoint never moves back. A cursor behind it is the progress of a republish, which ends
// when it reaches the checkpoint; partition offsets only grow and a republish drops them.
func TestCheckpointNeverMovesBack(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, _ := newStore(t, eventstore.Config{})
	term, err := store.BeginRelayTerm(ctx, "relay")
	if err != nil {
		t.Fatal(err)
	}
	cp := eventstore.Cursor{TxID: 1<<63 + 5, Position: 1 << 40}
	if err := store.SaveRelayProgress(ctx, "relay", term.Term, cp, []eventstore.PartitionOffset{{Topic: "a", Partition: 0, Next: 7}}); err != nil {
		t.Fatal(err)
	}
	behind := eventstore.Cursor{TxID: 10, Position: 5}
	if err := store.SaveRelayProgress(ctx, "relay", term.Term, behind, []eventstore.PartitionOffset{{Topic: "a", Partition: 0, Next: 3}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.LoadCheckpoint(ctx, "relay"); got != cp {
		t.Fatalf("checkpoint moved back to %+v, want %+v", got, cp)
	}
	next, err := store.BeginRelayTerm(ctx, "relay")
	if err != nil {
		t.Fatal(err)
	}
	if next.Republish == nil || *next.Republish != behind || next.From() != behind || next.Offsets[0].Next != 7 {
		t.Fatalf("term after a save behind the checkpoint = %+v", next)
	}

	if err := store.StartRepublish(ctx, "relay", next.Term, "cluster-b", true); err != nil {
		t.Fatal(err)
	}
	rep, err := store.BeginRelayTerm(ctx, "relay")
	if err != nil {
		t.Fatal(err)
	}
	if rep.ClusterID != "cluster-b" || rep.Republish == nil || *rep.Republish != (eventstore.Cursor{}) || len(rep.Offsets) != 0 || rep.Checkpoint != cp {
		t.Fatalf("term after StartRepublish = %+v", rep)
	}
	past := eventstore.Cursor{TxID: cp.TxID, Position: cp.Position + 1}
	if err := store.SaveRelayProgress(ctx, "relay", rep.Term, past, nil); err != nil {
		t.Fatal(err)
	}
	done, err := store.BeginRelayTerm(ctx, "relay")
	if err != nil {
		t.Fatal(err)
	}
	if done.Republish != nil || done.Checkpoint != past || done.ClusterID != "cluster-b" {
		t.Fatalf("term after the republish reached the checkpoint = %+v", done)
	}
	if err := store.StartRepublish(ctx, "relay", done.Term, "cluster-c", false); err != nil {
		t.Fatal(err)
	}
	if last, _ := store.BeginRelayTerm(ctx, "relay"); last.ClusterID != "cluster-c" || last.Republish != nil {
		t.Fatalf("recording a cluster id started a republish: %+v", last)
	}
}
