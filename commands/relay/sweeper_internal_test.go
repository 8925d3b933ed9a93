package relay

import (
	"testing"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

func seqs(skips []eventstore.Skip) []int64 {
	out := make([]int64, len(skips))
	for i, s := range skips {
		out[i] = s.Seq
	}
	return out
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A seq missing below a published one is given up only after the deadline, and not at all if it
// is published meanwhile; seqs given up are forgotten.
func TestSweeperGivesUpOnlyGapsPastTheDeadline(t *testing.T) {
	t.Parallel()
	s := newSweeper(Config{GapDeadline: 10 * time.Second, GapStreams: 10, GapLookback: 100, GapMaxSkips: 100})
	acme := domain.MustTenantID("acme")
	g1, _ := domain.GroupTopic(1)
	k := convKey{tenant: acme, topic: g1}
	t0 := time.Unix(1000, 0)
	s.learn(k, 1, nil, t0)
	s.observe([]seqEvent{{k, 1}, {k, 2}, {k, 5}, {k, 6}, {k, 9}}, t0)
	if s.missing != 4 {
		t.Fatalf("missing = %d, want 4 (3, 4, 7, 8)", s.missing)
	}
	if got := s.due(t0.Add(9*time.Second), sweeperActor); len(got) != 0 {
		t.Fatalf("gave up %v before the deadline", seqs(got))
	}
	s.observe([]seqEvent{{k, 4}, {k, 7}}, t0.Add(5*time.Second)) // late commits
	got := s.due(t0.Add(11*time.Second), sweeperActor)
	if !equal(seqs(got), []int64{3, 8}) || got[0].Reason != domain.SkipGapTimeout || got[0].Topic != g1 {
		t.Fatalf("due = %+v, want seqs 3 and 8", got)
	}
	s.settled(got)
	if s.missing != 0 || len(s.holed) != 0 {
		t.Fatalf("after settling: missing %d, holed %d", s.missing, len(s.holed))
	}
	if got := s.due(t0.Add(time.Hour), sweeperActor); len(got) != 0 {
		t.Fatalf("settled seqs came back: %v", seqs(got))
	}
}

// Holes the store reports below a conversation's first seq are tracked like gaps seen live;
// the cap on markers per call holds; evicted conversations are asked about again.
func TestSweeperLearnsEarlierHolesAndForgetsBeyondItsBound(t *testing.T) {
	t.Parallel()
	s := newSweeper(Config{GapDeadline: time.Second, GapStreams: 2, GapLookback: 100, GapMaxSkips: 3})
	acme := domain.MustTenantID("acme")
	var ks []convKey
	for i := range 3 {
		g, _ := domain.GroupTopic(int64(i + 1))
		ks = append(ks, convKey{tenant: acme, topic: g})
	}
	t0 := time.Unix(1000, 0)
	evs := []seqEvent{{ks[0], 10}, {ks[0], 11}, {ks[1], 4}}
	keys, probes := s.unknown(evs)
	if len(probes) != 2 || probes[0].Below != 10 || probes[1].Below != 4 || keys[0] != ks[0] {
		t.Fatalf("probes = %+v", probes)
	}
	s.learn(ks[0], 10, []eventstore.VersionRange{{From: 2, To: 3}, {From: 7, To: 9}}, t0)
	s.learn(ks[1], 4, nil, t0)
	s.observe(evs, t0)
	if s.missing != 5 {
		t.Fatalf("missing = %d, want 5", s.missing)
	}
	if got := s.due(t0.Add(2*time.Second), sweeperActor); len(got) != 3 {
		t.Fatalf("due returned %d skips, want the cap of 3", len(got))
	}
	// A third conversation evicts the least recently seen one (ks[0]) and its gaps.
	s.observe([]seqEvent{{ks[1], 5}, {ks[2], 1}}, t0)
	if _, ok := s.byKey[ks[0]]; ok || s.missing != 0 || len(s.holed) != 0 {
		t.Fatalf("eviction kept %v; missing %d", ks[0], s.missing)
	}
	if keys, _ := s.unknown([]seqEvent{{ks[0], 12}}); len(keys) != 1 {
		t.Fatal("an evicted conversation is not looked up again")
	}
}

func TestSeqEventsPicksConversationSeqs(t *testing.T) {
	t.Parallel()
	acme := domain.MustTenantID("acme")
	rec := func(stream string, v int64, typ domain.EventType) eventstore.Record {
		return eventstore.Record{Envelope: domain.Envelope{TenantID: acme, StreamID: stream, StreamVersion: v, EventType: typ}}
	}
	evs := seqEvents([]eventstore.Record{
		rec("grp1", 3, domain.EventGroupMessageSent),
		rec("p2p1_2", 2, domain.EventDirectSeqSkipped),
		rec("grp1/m/3", 1, domain.EventGroupMessageRecalled),
		rec("group:1", 4, domain.EventGroupCreated),
		rec("grp1/read/5", 1, domain.EventGroupReadMarked),
	})
	if len(evs) != 2 || evs[0].seq != 3 || evs[1].key.topic.String() != "p2p1_2" {
		t.Fatalf("seqEvents = %+v", evs)
	}
}
