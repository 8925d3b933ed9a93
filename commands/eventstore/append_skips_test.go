package eventstore_test

import (
	"errors"
	"testing"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// A marker takes a free seq; a seq that holds a message keeps it, and appending the same skips
// again stores nothing. A send that comes after the marker finds its seq taken.
func TestAppendSkipsIsIdempotentAndLosesToCommittedSends(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, _ := newStore(t, eventstore.Config{})
	acme := domain.MustTenantID("acme")
	topic, _ := domain.GroupTopic(7)
	sent := event(acme, topic.String(), 2, "u1:c2")
	if _, err := store.AppendBatch(ctx, []domain.Envelope{sent}); err != nil {
		t.Fatal(err)
	}
	skips := []eventstore.Skip{
		{Tenant: acme, Topic: topic, Seq: 1, Reason: domain.SkipGapTimeout},
		{Tenant: acme, Topic: topic, Seq: 2, Reason: domain.SkipGapTimeout},
		{Tenant: acme, Topic: topic, Seq: 3, Reason: domain.SkipAbandoned},
	}
	got, err := store.AppendSkips(ctx, skips)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].StreamVersion != 1 || got[1].StreamVersion != 3 || got[0].Position == 0 {
		t.Fatalf("stored markers %+v, want seqs 1 and 3", got)
	}
	if got[0].EventType != domain.EventGroupSeqSkipped {
		t.Fatalf("marker type %s", got[0].EventType)
	}
	again, err := store.AppendSkips(ctx, skips)
	if err != nil || len(again) != 0 {
		t.Fatalf("second AppendSkips stored %d markers, %v; want none", len(again), err)
	}
	late := event(acme, topic.String(), 3, "u1:c3")
	res, err := store.AppendBatch(ctx, []domain.Envelope{late})
	if err != nil || res[0].Status != eventstore.VersionTaken {
		t.Fatalf("send at a skipped seq = %+v, %v; want VersionTaken", res, err)
	}
	evs, err := store.ReadStream(ctx, acme, topic.String(), 0, 0)
	if err != nil || len(evs) != 3 {
		t.Fatalf("stream holds %d events, %v; want 3", len(evs), err)
	}
	if evs[1].EventID != sent.EventID {
		t.Fatalf("seq 2 holds %s, want the sent message", evs[1].EventType)
	}
	if _, err := store.AppendSkips(ctx, []eventstore.Skip{{Tenant: acme, Topic: topic, Seq: 4}}); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("a skip without a reason = %v, want ErrInvalid", err)
	}
}

// The relay's markers are written only by its current term.
func TestAppendSkipsFencedByTerm(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, _ := newStore(t, eventstore.Config{})
	acme := domain.MustTenantID("acme")
	topic, _ := domain.GroupTopic(8)
	skip := []eventstore.Skip{{Tenant: acme, Topic: topic, Seq: 1, Reason: domain.SkipGapTimeout}}
	if _, err := store.AppendSkipsFenced(ctx, "relay", 1, skip); !errors.Is(err, eventstore.ErrStaleTerm) {
		t.Fatalf("markers of a relay that never began a term = %v, want ErrStaleTerm", err)
	}
	old, _ := store.BeginRelayTerm(ctx, "relay")
	cur, _ := store.BeginRelayTerm(ctx, "relay")
	if _, err := store.AppendSkipsFenced(ctx, "relay", old.Term, skip); !errors.Is(err, eventstore.ErrStaleTerm) {
		t.Fatalf("markers of a deposed term = %v, want ErrStaleTerm", err)
	}
	if v, _ := store.LastVersion(ctx, acme, topic.String()); v != 0 {
		t.Fatalf("a deposed term's marker was stored (stream at %d)", v)
	}
	got, err := store.AppendSkipsFenced(ctx, "relay", cur.Term, skip)
	if err != nil || len(got) != 1 {
		t.Fatalf("markers of the current term = %d, %v", len(got), err)
	}
}

func TestMissingVersions(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, _ := newStore(t, eventstore.Config{})
	acme := domain.MustTenantID("acme")
	var evs []domain.Envelope
	for _, v := range []int64{1, 2, 3, 4, 5} {
		evs = append(evs, event(acme, "full", v, ""))
	}
	for _, v := range []int64{2, 3, 6, 9} {
		evs = append(evs, event(acme, "holed", v, ""))
	}
	if _, err := store.AppendBatch(ctx, evs); err != nil {
		t.Fatal(err)
	}
	got, err := store.MissingVersions(ctx, []eventstore.StreamProbe{
		{Tenant: acme, StreamID: "full", Below: 6},
		{Tenant: acme, StreamID: "holed", Below: 10},
		{Tenant: acme, StreamID: "holed", Below: 10}, // the same stream twice
		{Tenant: acme, StreamID: "empty", Below: 1},
	}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]eventstore.VersionRange{nil, {{1, 1}, {4, 5}, {7, 8}}, {{1, 1}, {4, 5}, {7, 8}}, nil}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("probe %d: %v, want %v", i, got[i], want[i])
		}
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("probe %d: %v, want %v", i, got[i], want[i])
			}
		}
	}
	narrow, err := store.MissingVersions(ctx, []eventstore.StreamProbe{{Tenant: acme, StreamID: "holed", Below: 10}}, 3)
	if err != nil || len(narrow[0]) != 1 || narrow[0][0] != (eventstore.VersionRange{From: 7, To: 8}) {
		t.Fatalf("window of 3 = %v, %v; want 7..8", narrow, err)
	}
}

func TestHistoricHolesAndSweptMark(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, _ := newStore(t, eventstore.Config{})
	acme := domain.MustTenantID("acme")
	g1, _ := domain.GroupTopic(1)
	g2, _ := domain.GroupTopic(2)
	var evs []domain.Envelope
	for _, v := range []int64{2, 3, 6} {
		e := event(acme, g1.String(), v, "")
		e.EventType = domain.EventGroupMessageSent
		evs = append(evs, e)
	}
	for _, v := range []int64{1, 2} {
		e := event(acme, g2.String(), v, "")
		e.EventType = domain.EventGroupMessageSent
		evs = append(evs, e)
	}
	other := event(acme, "group:1", 5, "") // not a conversation stream
	evs = append(evs, other)
	if _, err := store.AppendBatch(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if _, err := store.AppendSkips(ctx, []eventstore.Skip{{Tenant: acme, Topic: g1, Seq: 4, Reason: domain.SkipGapTimeout}}); err != nil {
		t.Fatal(err)
	}
	var got []eventstore.StreamHole
	if err := store.HistoricHoles(ctx, func(h eventstore.StreamHole) error { got = append(got, h); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []eventstore.StreamHole{{Tenant: acme, Topic: g1, From: 1, To: 1}, {Tenant: acme, Topic: g1, From: 5, To: 5}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("holes = %+v, want %+v", got, want)
	}
	term, _ := store.BeginRelayTerm(ctx, "relay")
	if term.HolesSwept {
		t.Fatal("a new relay starts with its history swept")
	}
	if err := store.MarkHolesSwept(ctx, "relay", term.Term-1); !errors.Is(err, eventstore.ErrStaleTerm) {
		t.Fatalf("mark with a stale term = %v", err)
	}
	if err := store.MarkHolesSwept(ctx, "relay", term.Term); err != nil {
		t.Fatal(err)
	}
	if next, _ := store.BeginRelayTerm(ctx, "relay"); !next.HolesSwept {
		t.Fatal("the swept mark did not stay")
	}
}
