package message_test

import (
	"errors"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
)

func TestRecallByModeratorIgnoresSenderAndWindow(t *testing.T) {
	t.Parallel()
	e := newOpsEnv(t, message.MessageOpsConfig{RecallWindow: time.Millisecond})
	ctx := testCtx(t)
	seq := e.send(t, alice, "spam")
	time.Sleep(5 * time.Millisecond) // past the sender's recall window
	mod := domain.Actor{Type: domain.ActorAdmin, ID: "moderator-1"}
	cmd := message.ModerationRecall{Tenant: e.tenant, Topic: e.topic, Seq: seq, Moderator: mod, CausationID: "cmd-9"}
	if _, err := e.h.RecallByModerator(ctx, cmd); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("recall without a reason: %v", err)
	}
	cmd.Reason = "spam"
	res, err := e.h.RecallByModerator(ctx, cmd)
	if err != nil || res.Seq != seq {
		t.Fatalf("moderation recall: %+v %v", res, err)
	}
	if _, err := e.h.RecallByModerator(ctx, cmd); deniedReason(err) != message.ReasonAlreadyRecalled {
		t.Fatalf("second recall: %v", err)
	}
	if _, err := e.h.Recall(ctx, e.ref(seq, alice)); err == nil {
		t.Fatal("the sender recalled a recalled message")
	}
	evs, err := e.store.ReadStream(ctx, e.tenant, domain.MessageOpsStreamID(e.topic, seq), 0, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("operations stream: %d %v", len(evs), err)
	}
	var p domain.MessageRecalled
	if err := evs[0].Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.By != 0 || p.Moderator != "moderator-1" || p.Reason != "spam" || evs[0].Actor != mod || evs[0].CausationID != "cmd-9" {
		t.Fatalf("recalled event: %+v actor %+v causation %q", p, evs[0].Actor, evs[0].CausationID)
	}
	if _, err := e.h.RecallByModerator(ctx, message.ModerationRecall{Tenant: e.tenant, Topic: e.topic, Seq: seq + 9,
		Moderator: mod, Reason: "x"}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown seq: %v", err)
	}
}
