package hot_test

import (
	"context"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
)

func watermark(ctx context.Context, t *testing.T, s *hot.Store, topic string) (int64, bool) {
	t.Helper()
	w, found, err := s.Watermark(ctx, tenant, rmtest.Topic(t, topic))
	if err != nil {
		t.Fatal(err)
	}
	return w, found
}

// The watermark stops below a missing seq, moves over a marker as over a message, and catches
// up when seqs arrive out of order, however far above it they are (the bitmap's base moves
// along in whole bytes).
func TestWatermarkFollowsSeqsInPlace(t *testing.T) {
	t.Parallel()
	for _, topic := range []string{"grp7", "p2p1_2"} {
		ctx, s, _, _ := newStore(t, hot.Config{}, nil)
		sent := func(seq int64) domain.Envelope { return rmtest.Sent(t, tenant, topic, seq, 1, "m") }
		if _, found := watermark(ctx, t, s, topic); found {
			t.Fatalf("%s: a watermark before any message", topic)
		}
		apply(ctx, t, s, tenant, sent(1), sent(2), sent(4))
		if w, found := watermark(ctx, t, s, topic); !found || w != 2 {
			t.Fatalf("%s: watermark with 3 missing = %d (found %v), want 2", topic, w, found)
		}
		for seq := int64(5); seq <= 40; seq++ {
			apply(ctx, t, s, tenant, sent(seq))
		}
		if w, _ := watermark(ctx, t, s, topic); w != 2 {
			t.Fatalf("%s: watermark = %d, want 2 still", topic, w)
		}
		apply(ctx, t, s, tenant, rmtest.Skipped(t, tenant, topic, 3))
		if w, _ := watermark(ctx, t, s, topic); w != 40 {
			t.Fatalf("%s: watermark after the marker at 3 = %d, want 40", topic, w)
		}
		apply(ctx, t, s, tenant, sent(42), sent(41), sent(41))
		if w, _ := watermark(ctx, t, s, topic); w != 42 {
			t.Fatalf("%s: watermark after 42, 41 = %d, want 42", topic, w)
		}
	}
}

// A topic whose state is gone (expired, or the Redis data lost) does not invent a watermark from
// the seqs that arrive later; the MySQL watermark written back makes it known again, and the
// seqs that arrived meanwhile count.
func TestWatermarkWrittenBackFromMySQL(t *testing.T) {
	t.Parallel()
	ctx, s, rdb, prefix := newStore(t, hot.Config{}, nil)
	topic := "grp9"
	sent := func(seq int64) domain.Envelope { return rmtest.Sent(t, tenant, topic, seq, 1, "m") }
	apply(ctx, t, s, tenant, sent(100), sent(101), sent(103))
	if _, found := watermark(ctx, t, s, topic); found {
		t.Fatal("a watermark was made up without seq 1 or MySQL")
	}
	w, err := s.RaiseWatermark(ctx, tenant, rmtest.Topic(t, topic), 99)
	if err != nil || w != 101 {
		t.Fatalf("RaiseWatermark(99) = %d, %v; want 101 (100 and 101 arrived before)", w, err)
	}
	apply(ctx, t, s, tenant, sent(102))
	if w, _ := watermark(ctx, t, s, topic); w != 103 {
		t.Fatalf("watermark = %d, want 103", w)
	}
	if w, err := s.RaiseWatermark(ctx, tenant, rmtest.Topic(t, topic), 50); err != nil || w != 103 {
		t.Fatalf("a lower watermark written back = %d, %v; want 103 kept", w, err)
	}

	// The bitmap evicted under memory pressure: the watermark is forgotten, not extended wrongly.
	keys, err := rdb.Keys(ctx, prefix+"*proj_seen").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("bitmap keys %v, %v", keys, err)
	}
	apply(ctx, t, s, tenant, sent(105))
	rdb.Del(ctx, keys[0])
	apply(ctx, t, s, tenant, sent(104))
	if w, found := watermark(ctx, t, s, topic); found && w > 104 {
		t.Fatalf("watermark %d after its bitmap was lost", w)
	}
	got, err := s.Watermarks(ctx, tenant, []domain.Topic{rmtest.Topic(t, topic), rmtest.Topic(t, "grp1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["grp1"]; ok {
		t.Fatalf("Watermarks knows an unknown topic: %v", got)
	}
}

// A marker of a cached group is indexed: a window shows it as a final hole, not as a message,
// and a range over it is complete.
func TestMarkerInTheWindow(t *testing.T) {
	t.Parallel()
	ctx, s, _, _ := newStore(t, hot.Config{}, nil)
	topic := rmtest.Topic(t, "grp3")
	apply(ctx, t, s, tenant, rmtest.Sent(t, tenant, "grp3", 1, 1, "a"), rmtest.Skipped(t, tenant, "grp3", 2),
		rmtest.Sent(t, tenant, "grp3", 3, 1, "c"))
	w, err := s.Window(ctx, tenant, topic, 1, 10, 10, false)
	if err != nil {
		t.Fatal(err)
	}
	if !w.Complete || len(w.Messages) != 2 || len(w.Skipped) != 1 || w.Skipped[0] != 2 || !w.HasWatermark || w.Watermark != 3 || w.LastSeq != 3 {
		t.Fatalf("window = %+v", w)
	}
	msgs, complete, err := s.Range(ctx, tenant, topic, 1, 3)
	if err != nil || !complete || len(msgs) != 2 {
		t.Fatalf("range over the marker: %d messages, complete %v, %v", len(msgs), complete, err)
	}
	if _, complete, _ := s.Range(ctx, tenant, topic, 1, 4); complete {
		t.Fatal("a range over a seq that holds nothing is complete")
	}
}
