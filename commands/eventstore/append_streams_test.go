package eventstore_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

func TestAppendStreamsAllOrNothing(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t, eventstore.Config{})
	ctx := testCtx(t)
	tenant := domain.MustTenantID("multi")
	ev := func(stream string) domain.Envelope { return event(tenant, stream, 0, "") }

	out, err := store.AppendStreams(ctx, tenant, []eventstore.StreamAppend{
		{StreamID: "group:1", ExpectedVersion: 0, Events: []domain.Envelope{ev("group:1")}},
		{StreamID: "member:1:5", ExpectedVersion: 0, Events: []domain.Envelope{ev("member:1:5"), ev("member:1:5")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0].StreamVersion != 1 || out[2].StreamVersion != 2 || out[2].Position == 0 {
		t.Fatalf("appended %+v", out)
	}
	// The second part is stale: nothing of the first part may be written either.
	_, err = store.AppendStreams(ctx, tenant, []eventstore.StreamAppend{
		{StreamID: "group:1", ExpectedVersion: 1, Events: []domain.Envelope{ev("group:1")}},
		{StreamID: "member:1:5", ExpectedVersion: 1, Events: []domain.Envelope{ev("member:1:5")}},
	})
	if !errors.Is(err, domain.ErrConcurrency) {
		t.Fatalf("stale part: %v, want ErrConcurrency", err)
	}
	if v, _ := store.LastVersion(ctx, tenant, "group:1"); v != 1 {
		t.Fatalf("group stream at %d after a failed multi-stream append, want 1", v)
	}
}

func TestAppendStreamsSerialisesOnSharedStream(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t, eventstore.Config{})
	ctx := testCtx(t)
	tenant := domain.MustTenantID("multi")
	// 20 writers each add their own member stream plus the shared group stream at version 0:
	// exactly one may win.
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			member := "member:1:" + string(rune('a'+i))
			_, err := store.AppendStreams(ctx, tenant, []eventstore.StreamAppend{
				{StreamID: "group:1", Events: []domain.Envelope{event(tenant, "group:1", 0, "")}},
				{StreamID: member, Events: []domain.Envelope{event(tenant, member, 0, "")}},
			})
			switch {
			case err == nil:
				mu.Lock()
				wins++
				mu.Unlock()
			case !errors.Is(err, domain.ErrConcurrency):
				t.Errorf("append: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d writers won, want 1", wins)
	}
	n, err := store.Count(ctx, eventstore.Filter{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d events stored, want 2", n)
	}
}

// A part without events writes nothing but checks its stream: the call commits while that
// stream is at the expected version and fails with ErrConcurrency, writing nothing, once it moved.
func TestAppendStreamsChecksPartsWithoutEvents(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t, eventstore.Config{})
	ctx := testCtx(t)
	tenant := domain.MustTenantID("multi")
	ev := func(stream string) domain.Envelope { return event(tenant, stream, 0, "") }
	if _, err := store.Append(ctx, tenant, "member:1:2", 0, []domain.Envelope{ev("member:1:2")}); err != nil {
		t.Fatal(err)
	}
	out, err := store.AppendStreams(ctx, tenant, []eventstore.StreamAppend{
		{StreamID: "member:1:2", ExpectedVersion: 1},
		{StreamID: "member:1:3", ExpectedVersion: 0, Events: []domain.Envelope{ev("member:1:3")}},
	})
	if err != nil || len(out) != 1 || out[0].StreamID != "member:1:3" {
		t.Fatalf("append beside an unchanged stream: %+v, %v", out, err)
	}
	if _, err := store.Append(ctx, tenant, "member:1:2", 1, []domain.Envelope{ev("member:1:2")}); err != nil {
		t.Fatal(err)
	}
	_, err = store.AppendStreams(ctx, tenant, []eventstore.StreamAppend{
		{StreamID: "member:1:2", ExpectedVersion: 1},
		{StreamID: "member:1:3", ExpectedVersion: 1, Events: []domain.Envelope{ev("member:1:3")}},
	})
	if !errors.Is(err, domain.ErrConcurrency) {
		t.Fatalf("append beside a stream that moved: %v, want ErrConcurrency", err)
	}
	for stream, want := range map[string]int64{"member:1:2": 2, "member:1:3": 1} {
		if v, _ := store.LastVersion(ctx, tenant, stream); v != want {
			t.Errorf("%s at version %d, want %d", stream, v, want)
		}
	}
}
