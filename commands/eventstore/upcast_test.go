package eventstore_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// A member.muted.v1 event stays v1 in the table and on the outbox tail, and comes out as v2 from
// every other read.
func TestReadsUpcastButTheOutboxTailDoesNot(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t, eventstore.Config{})
	ctx := testCtx(t)
	tenant := domain.MustTenantID("acme")
	stream := domain.MembershipStreamID(7, 3)
	payload, _ := json.Marshal(domain.MemberMutedV1{GroupID: 7, User: 3, By: 1, MutedAt: time.Now().UTC()})
	old := domain.Envelope{EventID: uuid.Must(uuid.NewV7()), TenantID: tenant, SourceService: domain.SourceService,
		EventType: domain.EventMemberMutedV1, BizType: domain.BizTypeMember, Version: 1, OccurredAt: time.Now().UTC(),
		Actor: domain.Actor{Type: domain.ActorUser, ID: "1"}, StreamID: stream, StreamVersion: 1, IdempotencyKey: "k1", Payload: payload}
	if _, err := store.Append(ctx, tenant, stream, 0, []domain.Envelope{old}); err != nil {
		t.Fatal(err)
	}
	current := func(what string, e domain.Envelope) {
		t.Helper()
		var p domain.MemberMuted
		if e.EventID != old.EventID || e.EventType != domain.EventMemberMuted || e.Version != 2 || e.Decode(&p) != nil || p.Muted || p.User != 3 {
			t.Errorf("%s: %s version %d %s, want member.muted.v2 with muted false", what, e.EventType, e.Version, e.Payload)
		}
	}
	evs, err := store.ReadStream(ctx, tenant, stream, 0, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("ReadStream: %v %v", evs, err)
	}
	current("ReadStream", evs[0])
	all, err := store.ReadAll(ctx, eventstore.Filter{Tenant: tenant, EventTypes: domain.Versions(domain.EventMemberMuted)}, 0, 0)
	if err != nil || len(all) != 1 {
		t.Fatalf("ReadAll: %v %v", all, err)
	}
	current("ReadAll", all[0])
	found, err := store.FindByIdempotencyKey(ctx, tenant, stream, "k1")
	if err != nil {
		t.Fatal(err)
	}
	current("FindByIdempotencyKey", found)

	var storedType string
	if err := pool.QueryRow(ctx, `SELECT event_type FROM events WHERE event_id = $1`, old.EventID).Scan(&storedType); err != nil || storedType != string(domain.EventMemberMutedV1) {
		t.Errorf("the stored row says %q (%v): stored events are never rewritten", storedType, err)
	}
	var tail []eventstore.Record
	for deadline := time.Now().Add(30 * time.Second); len(tail) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if tail, err = store.ReadCommitted(ctx, eventstore.Cursor{}, 10); err != nil {
			t.Fatal(err)
		}
	}
	if len(tail) != 1 || tail[0].Envelope.EventType != domain.EventMemberMutedV1 || tail[0].Envelope.Version != 1 {
		t.Fatalf("the outbox tail returned %+v, want the event as stored (v1)", tail)
	}
}

func TestCursorText(t *testing.T) {
	t.Parallel()
	c := eventstore.Cursor{TxID: 18446744073709551615, Position: 42}
	got, err := eventstore.ParseCursor(" " + c.String() + "\n")
	if err != nil || got != c {
		t.Fatalf("ParseCursor(String()) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1", "a:1", "1:-2", "1:2:3", "-1:2"} {
		if _, err := eventstore.ParseCursor(bad); err == nil {
			t.Errorf("ParseCursor(%q) accepted", bad)
		}
	}
	r := eventstore.Range{From: eventstore.Cursor{TxID: 5, Position: 9}, Horizon: 20}
	if r.End() != (eventstore.Cursor{TxID: 20}) {
		t.Errorf("End = %s, want 20:0", r.End())
	}
	r.To = eventstore.Cursor{TxID: 10, Position: 3}
	if r.End() != r.To {
		t.Errorf("End with an upper bound = %s, want %s", r.End(), r.To)
	}
	r = eventstore.Range{From: eventstore.Cursor{TxID: 30, Position: 1}, Horizon: 20}
	if r.End() != r.From {
		t.Errorf("End behind the start = %s, want %s", r.End(), r.From)
	}
}
