package ws

import (
	"fmt"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/fanout"
)

// A sub racing a drop asks the Policy again only when the drop concerns its own topic's shard:
// removals elsewhere on the node must not make unrelated subs fail with a conflict.
func TestDropsCountPerTopicShard(t *testing.T) {
	h := NewHub()
	tenant := domain.MustTenantID("acme")
	topic := func(i int) domain.Topic {
		tp, err := domain.ParseTopic(fmt.Sprintf("grp%d", i))
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	a := topic(1)
	ka := hubKey{tenant, a.String()}
	// A topic in another shard than a's.
	var b domain.Topic
	for i := 2; ; i++ {
		b = topic(i)
		if h.dropShard(hubKey{tenant, b.String()}) != h.dropShard(ka) {
			break
		}
	}
	kb := hubKey{tenant, b.String()}
	epochA, epochB := h.dropShard(ka).Load(), h.dropShard(kb).Load()

	h.control(&fanout.Message{Kind: fanout.KindControl, Tenant: tenant, Topic: a, What: "dissolved", Drop: fanout.DropAll})

	s := &session{user: 7}
	if h.joinUnless(ka, s, epochA) {
		t.Error("a sub to the dropped topic that asked the Policy before the drop joined anyway")
	}
	if !h.joinUnless(kb, s, epochB) {
		t.Error("a drop in another topic's shard refused a sub to this one")
	}
	if !h.joinUnless(ka, s, h.dropShard(ka).Load()) {
		t.Error("a sub that asked the Policy after the drop was refused")
	}
}

// SubscribedUsers names each user with a session in the topic once, and no one for a topic
// without sessions here.
func TestSubscribedUsers(t *testing.T) {
	h := NewHub()
	tenant := domain.MustTenantID("acme")
	topic, _ := domain.ParseTopic("grp1")
	other, _ := domain.ParseTopic("grp2")
	k := hubKey{tenant, topic.String()}
	for _, u := range []domain.UserID{7, 7, 8} {
		if !h.joinUnless(k, &session{user: u}, h.dropShard(k).Load()) {
			t.Fatal("join refused")
		}
	}
	got := h.SubscribedUsers(tenant, topic)
	if len(got) != 2 || !got[7] || !got[8] {
		t.Fatalf("subscribed users %v, want 7 and 8", got)
	}
	if got := h.SubscribedUsers(tenant, other); len(got) != 0 {
		t.Fatalf("a topic without sessions here has subscribed users %v", got)
	}
}
