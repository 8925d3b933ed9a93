package eventstore_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

func TestAppendBatchMixedOutcomes(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, _ := newStore(t, eventstore.Config{})
	acme, other := domain.MustTenantID("acme"), domain.MustTenantID("other")

	stored1 := event(acme, "s1", 1, "k1")
	stored2 := event(acme, "s2", 1, "")
	pre, err := store.AppendBatch(ctx, []domain.Envelope{stored1, stored2})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range pre {
		if r.Status != eventstore.Appended || r.Position == 0 {
			t.Fatalf("setup event %d: %+v", i, r)
		}
	}

	sameID := event(acme, "s2", 9, "")
	sameID.EventID = stored2.EventID
	batch := []domain.Envelope{
		0: event(acme, "s1", 2, "k2"),  // free version
		1: event(acme, "s2", 1, "kx"),  // version 1 is stored2's
		2: event(acme, "s1", 5, "k1"),  // key of stored1
		3: event(acme, "s3", 1, "k3"),  // free version
		4: event(acme, "s3", 2, "k3"),  // key of event 3 of this batch
		5: event(acme, "s1", 2, ""),    // version taken by event 0 of this batch
		6: sameID,                      // event id of stored2
		7: event(other, "s1", 1, "k1"), // same stream and key, other tenant
	}
	res, err := store.AppendBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []eventstore.AppendStatus{
		eventstore.Appended, eventstore.VersionTaken, eventstore.Duplicate, eventstore.Appended,
		eventstore.Duplicate, eventstore.VersionTaken, eventstore.Duplicate, eventstore.Appended,
	}
	if len(res) != len(want) {
		t.Fatalf("%d results for %d events", len(res), len(want))
	}
	for i, r := range res {
		if r.Status != want[i] {
			t.Errorf("event %d: status %s, want %s", i, r.Status, want[i])
		}
	}
	if !(res[0].Position > pre[1].Position && res[3].Position > res[0].Position && res[7].Position > res[3].Position) {
		t.Errorf("appended positions do not follow batch order: %d %d %d", res[0].Position, res[3].Position, res[7].Position)
	}
	for _, i := range []int{1, 5} {
		if res[i].Position != 0 || res[i].Existing.EventID != [16]byte{} {
			t.Errorf("event %d: version taken carries %+v", i, res[i])
		}
	}
	// Duplicates carry the stored original, with its own stream version and event id.
	assertSameEvent(t, res[2].Existing, withPosition(stored1, pre[0].Position))
	if res[2].Position != pre[0].Position {
		t.Errorf("duplicate position %d, want %d", res[2].Position, pre[0].Position)
	}
	assertSameEvent(t, res[4].Existing, withPosition(batch[3], res[3].Position))
	assertSameEvent(t, res[6].Existing, withPosition(stored2, pre[1].Position))

	streams := map[string][]int64{"s1": {1, 2}, "s2": {1}, "s3": {1}}
	for stream, versions := range streams {
		got, err := store.ReadStream(ctx, acme, stream, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(versions) {
			t.Fatalf("stream %s holds %d events, want %d", stream, len(got), len(versions))
		}
		for i, e := range got {
			if e.StreamVersion != versions[i] {
				t.Fatalf("stream %s event %d at version %d", stream, i, e.StreamVersion)
			}
		}
	}
	s1, _ := store.ReadStream(ctx, acme, "s1", 1, 1)
	assertSameEvent(t, s1[0], withPosition(batch[0], res[0].Position))
}

func withPosition(e domain.Envelope, pos int64) domain.Envelope {
	e.Position = pos
	return e
}

func TestAppendBatchAllConflictsWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, _ := newStore(t, eventstore.Config{})
	acme := domain.MustTenantID("acme")
	if _, err := store.AppendBatch(ctx, []domain.Envelope{event(acme, "s", 1, "k")}); err != nil {
		t.Fatal(err)
	}
	res, err := store.AppendBatch(ctx, []domain.Envelope{event(acme, "s", 1, ""), event(acme, "s", 2, "k")})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != eventstore.VersionTaken || res[1].Status != eventstore.Duplicate || res[1].Existing.StreamVersion != 1 {
		t.Fatalf("results = %+v", res)
	}
	if n, _ := store.Count(ctx, eventstore.Filter{}); n != 1 {
		t.Fatalf("%d events stored, want 1", n)
	}
}

// TestAppendBatchConcurrentWriters races batches that overlap on versions and idempotency keys:
// each version and each key must end up stored exactly once, and every event gets an outcome
// consistent with what was stored.
func TestAppendBatchConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, _ := newStore(t, eventstore.Config{})
	acme := domain.MustTenantID("acme")
	const writers, versions = 6, 60
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		appended = map[string]int{}
	)
	for w := range writers {
		wg.Go(func() {
			var batch []domain.Envelope
			for v := int64(1); v <= versions; v++ {
				// Writers share versions; a key per (stream, version) is shared too, so a
				// retry of the same send by another writer is a duplicate, not a new message.
				stream := fmt.Sprintf("s%d", v%3)
				batch = append(batch, event(acme, stream, v, fmt.Sprintf("key-%d-w%d", v, w%2)))
			}
			res, err := store.AppendBatch(ctx, batch)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for i, r := range res {
				switch r.Status {
				case eventstore.Appended:
					appended[fmt.Sprintf("%s/%d", batch[i].StreamID, batch[i].StreamVersion)]++
				case eventstore.Duplicate:
					if r.Existing.IdempotencyKey != batch[i].IdempotencyKey || r.Existing.StreamID != batch[i].StreamID {
						t.Errorf("duplicate of the wrong event: %+v for %+v", r.Existing, batch[i])
					}
				}
			}
		})
	}
	wg.Wait()
	if len(appended) != versions {
		t.Fatalf("%d versions appended, want %d", len(appended), versions)
	}
	for k, n := range appended {
		if n != 1 {
			t.Fatalf("version %s appended %d times", k, n)
		}
	}
	if n, _ := store.Count(ctx, eventstore.Filter{Tenant: acme}); n != versions {
		t.Fatalf("%d events stored, want %d", n, versions)
	}
}
