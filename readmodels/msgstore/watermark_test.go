package msgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
	"github.com/imledger/imledger/readmodels/msgstore"
)

func (f fixture) watermark(ctx context.Context, t *testing.T, topic string) int64 {
	t.Helper()
	w, err := f.store.Watermark(ctx, f.tenant, f.tables, rmtest.Topic(t, topic))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func seqsOf(t *testing.T, f fixture, ctx context.Context, topic string) []int64 {
	t.Helper()
	var out []int64
	for _, m := range f.page(ctx, t, topic, 0) {
		out = append(out, m.Seq)
	}
	return out
}

// The watermark stops below a missing seq, moves over a seq-skip marker as over a message, and
// catches up at once when a seq committed out of order arrives: in one batch (scripted) or
// statement by statement (a batch with a recall), for group and 1:1 topics.
func TestWatermarkFollowsMessagesAndMarkers(t *testing.T) {
	t.Parallel()
	for _, topic := range []string{"grp41", "p2p5_9"} {
		for _, scripted := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/scripted=%v", topic, scripted), func(t *testing.T) {
				t.Parallel()
				ctx, f := setup(t)
				apply := func(evs ...domain.Envelope) {
					t.Helper()
					if !scripted {
						// A recall makes the batch go statement by statement.
						evs = append(evs, rmtest.Recalled(t, f.tenant, topic, 1, 5))
					}
					f.apply(ctx, t, evs...)
				}
				if w := f.watermark(ctx, t, topic); w != 0 {
					t.Fatalf("watermark of an empty topic = %d", w)
				}
				apply(rmtest.Sent(t, f.tenant, topic, 1, 5, "a"), rmtest.Sent(t, f.tenant, topic, 2, 5, "b"),
					rmtest.Sent(t, f.tenant, topic, 4, 5, "d"))
				if w := f.watermark(ctx, t, topic); w != 2 {
					t.Fatalf("watermark with seq 3 missing = %d, want 2", w)
				}
				apply(rmtest.Sent(t, f.tenant, topic, 6, 5, "f"))
				if w := f.watermark(ctx, t, topic); w != 2 {
					t.Fatalf("watermark = %d, want 2 still", w)
				}
				apply(rmtest.Skipped(t, f.tenant, topic, 3))
				if w := f.watermark(ctx, t, topic); w != 4 {
					t.Fatalf("watermark after a marker at 3 = %d, want 4", w)
				}
				apply(rmtest.Sent(t, f.tenant, topic, 5, 5, "e")) // committed out of order
				if w := f.watermark(ctx, t, topic); w != 6 {
					t.Fatalf("watermark after the late seq 5 = %d, want 6", w)
				}
				if got := seqsOf(t, f, ctx, topic); len(got) != 5 || got[2] != 4 {
					t.Fatalf("history = %v, want 1 2 4 5 6 without the marker", got)
				}
				// A redelivered marker changes nothing; a marker never replaces a message.
				apply(rmtest.Skipped(t, f.tenant, topic, 3), rmtest.Skipped(t, f.tenant, topic, 4))
				if got := seqsOf(t, f, ctx, topic); len(got) != 5 || got[2] != 4 {
					t.Fatalf("history after repeated markers = %v", got)
				}
				msgs, _, err := f.store.Page(ctx, f.tenant, f.tables, msgstore.PageQuery{Topic: rmtest.Topic(t, topic), Limit: 10, UpTo: 4})
				if err != nil || len(msgs) != 3 || msgs[2].Seq != 4 {
					t.Fatalf("page up to 4 = %d messages, %v", len(msgs), err)
				}
			})
		}
	}
}

// Watermarks answers many topics in one call; a bulk load computes the watermarks its rows imply.
func TestWatermarksAndBulkLoad(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	evs := []domain.Envelope{
		rmtest.Sent(t, f.tenant, "grp1", 1, 5, "a"), rmtest.Sent(t, f.tenant, "grp1", 3, 5, "c"),
		rmtest.Sent(t, f.tenant, "grp2", 1, 5, "a"), rmtest.Skipped(t, f.tenant, "grp2", 2),
		rmtest.Sent(t, f.tenant, "p2p1_2", 2, 1, "b"),
		// Without a gap (a bulk load takes their highest seq at once), and with one after 3.
		rmtest.Sent(t, f.tenant, "grp3", 1, 5, "a"), rmtest.Sent(t, f.tenant, "grp3", 2, 5, "b"),
		rmtest.Sent(t, f.tenant, "grp3", 3, 5, "c"), rmtest.Sent(t, f.tenant, "grp3", 5, 5, "e"),
		rmtest.Sent(t, f.tenant, "p2p1_3", 1, 1, "a"), rmtest.Sent(t, f.tenant, "p2p1_3", 2, 3, "b"),
		rmtest.Sent(t, f.tenant, "grp4", 1, 5, "a"), rmtest.Sent(t, f.tenant, "grp4", 2, 5, "b"),
	}
	f.apply(ctx, t, evs...)
	topics := []domain.Topic{rmtest.Topic(t, "grp1"), rmtest.Topic(t, "grp2"), rmtest.Topic(t, "p2p1_2"), rmtest.Topic(t, "grp9"),
		rmtest.Topic(t, "grp3"), rmtest.Topic(t, "p2p1_3"), rmtest.Topic(t, "grp4")}
	got, err := f.store.Watermarks(ctx, f.tenant, f.tables, topics)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"grp1": 1, "grp2": 2, "p2p1_2": 0, "grp9": 0, "grp3": 3, "p2p1_3": 2, "grp4": 2}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("watermark of %s = %d, want %d", k, got[k], v)
		}
	}

	fresh := msgstore.DefaultTables().WithSuffix("_bl")
	bl, err := f.store.StartBulkLoad(ctx, f.tenant, msgstore.DefaultTables(), fresh)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bl.Apply(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if err := bl.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	loaded, err := f.store.Watermarks(ctx, f.tenant, fresh, topics)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if loaded[k] != v {
			t.Errorf("bulk-loaded watermark of %s = %d, want %d", k, loaded[k], v)
		}
	}
	live, _ := f.store.Checksum(ctx, f.tenant, f.tables)
	rebuilt, _ := f.store.Checksum(ctx, f.tenant, fresh)
	for topic, sum := range live {
		if rebuilt[topic] != sum {
			t.Errorf("%s: live %+v, bulk load %+v", topic, sum, rebuilt[topic])
		}
	}
	if live["grp2"].Rows != 2 {
		t.Errorf("grp2 has %d rows, want the message and the marker", live["grp2"].Rows)
	}
}
