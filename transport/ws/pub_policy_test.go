package ws_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/ws"
)

// countingSend refuses grp2 and counts how often it is asked.
type countingSend struct{ calls atomic.Int64 }

func (c *countingSend) CanSend(_ context.Context, _ domain.TenantID, _ domain.UserID, topic domain.Topic) error {
	c.calls.Add(1)
	if topic.String() == "grp2" {
		return &domain.DeniedError{Reason: "not_member"}
	}
	return nil
}

type readAll struct{}

func (readAll) CanRead(context.Context, domain.TenantID, domain.UserID, domain.Topic) error {
	return nil
}

// TestPubAsksTheSendPolicyOnce: with a send handler that applies the send policy itself
// (MemberPolicy.SenderChecks), a pub asks the policy once, not once in the gateway and again in
// the handler; a pub the policy refuses is refused all the same, with the same answer.
func TestPubAsksTheSendPolicyOnce(t *testing.T) {
	t.Parallel()
	for _, senderChecks := range []bool{true, false} {
		c := newCluster(t)
		send := &countingSend{}
		h, err := message.NewSendMessageHandler(message.SendMessageDeps{Store: c.store, Redis: c.rdb, Policy: send},
			message.SendMessageConfig{Seq: seq.Config{KeyPrefix: c.prefix}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		n := c.node(t, "a", nodeOpts{sender: h, policy: ws.MemberPolicy{Read: readAll{}, Send: send, SenderChecks: senderChecks}})
		cl := dial(t, n, "alice", dialOpts{})
		cl.login(c, 1)
		if r := cl.pub("p1", "grp1", "hello"); r.Code != 202 {
			t.Fatalf("pub to grp1: %+v", r)
		}
		perPub := int64(1)
		if !senderChecks {
			perPub = 2
		}
		if got := send.calls.Load(); got != perPub {
			t.Errorf("sender checks %v: the policy was asked %d times for one pub, want %d", senderChecks, got, perPub)
		}
		if r := cl.pub("p2", "grp2", "hello"); r.Code != 403 || r.Reason != "not_member" {
			t.Errorf("sender checks %v: pub to grp2 = %+v, want 403 not_member", senderChecks, r)
		}
	}
}
