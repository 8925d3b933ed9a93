package domain_test

import (
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

func TestSeqSkippedMarkerSitsAtItsSeq(t *testing.T) {
	t.Parallel()
	tenant := domain.MustTenantID("acme")
	grp, _ := domain.GroupTopic(7)
	p2p, err := domain.ParseTopic("p2p3_9")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		topic domain.Topic
		typ   domain.EventType
		cat   domain.Category
	}{
		{grp, domain.EventGroupSeqSkipped, domain.CategoryGroupMessage},
		{p2p, domain.EventDirectSeqSkipped, domain.CategoryDirectMessage},
	} {
		e, err := domain.NewSeqSkipped(tenant, tc.topic, 42, domain.SkipGapTimeout, domain.Actor{Type: domain.ActorSystem, ID: "relay"}, at)
		if err != nil {
			t.Fatal(err)
		}
		if e.EventType != tc.typ || e.StreamID != tc.topic.String() || e.StreamVersion != 42 || !e.OccurredAt.Equal(at) {
			t.Fatalf("marker %+v: want type %s at %s/42", e, tc.typ, tc.topic)
		}
		if info, ok := domain.LookupEventType(tc.typ); !ok || info.Category != tc.cat {
			t.Fatalf("%s registered as %+v", tc.typ, info)
		}
		var p domain.SeqSkipped
		if err := e.Decode(&p); err != nil || p.Seq != 42 || p.Topic != tc.topic.String() || p.Reason != domain.SkipGapTimeout {
			t.Fatalf("payload %+v, %v", p, err)
		}
		if !domain.IsConversationSeqEvent(e.EventType) {
			t.Errorf("%s is not a conversation seq event", e.EventType)
		}
	}
	if domain.IsConversationSeqEvent(domain.EventGroupMessageRecalled) {
		t.Error("a recall holds no seq of the conversation stream")
	}
	if _, err := domain.NewSeqSkipped(tenant, grp, 0, domain.SkipAbandoned, domain.Actor{}, at); err == nil {
		t.Error("a marker at seq 0 was built")
	}
}
