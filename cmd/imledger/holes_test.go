package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// refusingSendStore refuses, as PostgreSQL refuses data it cannot store, every append that
// carries a message with client_msg_id "refused".
type refusingSendStore struct{ message.MessageStore }

func (s refusingSendStore) AppendBatch(ctx context.Context, events []domain.Envelope) ([]eventstore.AppendResult, error) {
	for _, e := range events {
		var p domain.MessageSent
		if e.EventType == domain.EventGroupMessageSent && e.Decode(&p) == nil && p.ClientMsgID == "refused" {
			return nil, &pgconn.PgError{Code: "22P05", Message: "unsupported Unicode escape sequence"}
		}
	}
	return s.MessageStore.AppendBatch(ctx, events)
}

// A seq the send handler gives up is final at once: the node appends its seq-skip marker
// without waiting for the relay's gap deadline (a minute here), so history's last_seq moves past
// the hole as soon as the next message is projected.
func TestGivenUpSeqIsMarkedAtOnce(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, testenv.Kafka(t), true)
	env.relay = "{min_poll: 1ms, max_poll: 20ms, gap_deadline: 60s}"
	a := env.startNodeWith(t, "node-a", func(s message.MessageStore) message.MessageStore {
		return refusingSendStore{s}
	})
	alice := signUp(t, a.base, "alice")
	gid := createGroup(t, a.base, alice, "holes")
	topic := "grp" + gid

	seqOf := func(r answer) int64 {
		s, _ := strconv.ParseInt(fmt.Sprint(r.Data["seq"]), 10, 64)
		return s
	}
	if r := sendREST(t, a.base, alice, topic, "m1", `"one"`); r.status != http.StatusCreated {
		t.Fatalf("send m1: %d %s", r.status, r.raw)
	}
	if r := sendREST(t, a.base, alice, topic, "refused", `"two"`); r.status != http.StatusBadRequest {
		t.Fatalf("send refused by the store: %d %s, want 400", r.status, r.raw)
	}
	r := sendREST(t, a.base, alice, topic, "m3", `"three"`)
	if r.status != http.StatusCreated {
		t.Fatalf("send m3: %d %s", r.status, r.raw)
	}
	last := seqOf(r)
	hole := last - 1
	deadline := time.Now().Add(20 * time.Second)
	for eventTypeAt(t, env, topic, hole) != string(domain.EventGroupSeqSkipped) {
		if time.Now().After(deadline) {
			t.Fatalf("seq %d given up by the refused send holds %q, want a seq-skip marker well before the gap deadline",
				hole, eventTypeAt(t, env, topic, hole))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		h := call(t, http.MethodGet, fmt.Sprintf("%s/v1/im/topics/%s/messages?after_seq=0", a.base, topic), alice.token, "", "")
		if h.status != http.StatusOK {
			t.Fatalf("history: %d %s", h.status, h.raw)
		}
		if got, _ := strconv.ParseInt(fmt.Sprint(h.Data["last_seq"]), 10, 64); got == last {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("history's last_seq stays below %d across the given-up seq %d: %s", last, hole, h.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
