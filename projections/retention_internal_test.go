package projections

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

func expireEnv(t *testing.T, typ domain.EventType, stream string, version int64, at time.Time, payload any) domain.Envelope {
	t.Helper()
	e, err := domain.NewEnvelope(domain.MustTenantID("acme"), stream, version, typ, domain.Actor{Type: domain.ActorUser, ID: "1"}, payload)
	if err != nil {
		t.Fatal(err)
	}
	e.OccurredAt = at
	return e
}

// Under a horizon, an old send becomes an expired marker plus the read marks it implied, old
// recalls and deletions go, read marks and new events stay; without a horizon nothing changes.
func TestExpireReadsOldHistoryAsExpired(t *testing.T) {
	t.Parallel()
	horizon := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	old, recent := horizon.Add(-time.Hour), horizon.Add(time.Hour)
	direct, _ := domain.DirectTopic(1, 2)
	events := []domain.Envelope{
		expireEnv(t, domain.EventDirectMessageSent, direct.String(), 1, old,
			domain.MessageSent{Topic: direct.String(), Seq: 1, From: 1, To: 2, Content: json.RawMessage(`"x"`), SentAt: old}),
		expireEnv(t, domain.MessageEventType(domain.TopicDirect, domain.ActionRecalled), "ops", 1, old,
			domain.MessageRecalled{Topic: direct.String(), Seq: 1, By: 1, RecalledAt: old}),
		expireEnv(t, domain.MessageEventType(domain.TopicDirect, domain.ActionReadMarked), "read", 1, old,
			domain.ReadMarked{Topic: direct.String(), User: 2, ReadSeq: 1, At: old}),
		expireEnv(t, domain.EventDirectMessageSent, direct.String(), 2, recent,
			domain.MessageSent{Topic: direct.String(), Seq: 2, From: 2, To: 1, Content: json.RawMessage(`"y"`), SentAt: recent}),
		expireEnv(t, domain.EventGroupCreated, "group/1", 1, old, map[string]any{}),
	}
	if got := expire(events, time.Time{}); len(got) != len(events) {
		t.Fatalf("no horizon: %d events, want %d", len(got), len(events))
	}
	got := expire(events, horizon)
	var types []domain.EventType
	for _, e := range got {
		types = append(types, e.EventType)
	}
	want := []domain.EventType{domain.EventDirectSeqSkipped, "message.direct.read_marked.v1", "message.direct.read_marked.v1",
		"message.direct.read_marked.v1", domain.EventDirectMessageSent, domain.EventGroupCreated}
	if len(types) != len(want) {
		t.Fatalf("types = %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("types = %v, want %v", types, want)
		}
	}
	var marker domain.SeqSkipped
	if err := json.Unmarshal(got[0].Payload, &marker); err != nil || marker.Seq != 1 || marker.Reason != domain.SkipExpired ||
		got[0].EventID != events[0].EventID {
		t.Errorf("marker = %+v, %v (id kept: %v)", marker, err, got[0].EventID == events[0].EventID)
	}
	var sender, peer domain.ReadMarked
	_ = json.Unmarshal(got[1].Payload, &sender)
	_ = json.Unmarshal(got[2].Payload, &peer)
	if sender.User != 1 || sender.ReadSeq != 1 || peer.User != 2 || peer.ReadSeq != 0 || got[1].EventID == got[0].EventID || got[1].EventID == got[2].EventID {
		t.Errorf("implied read marks: sender %+v, peer %+v", sender, peer)
	}
}
