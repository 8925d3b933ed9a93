package message_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// TestRetryTakesOverAnAttemptThisNodeLost leaves a pending claim of this node whose attempt is
// no longer in flight, as a lost Redis reply (or a lost failed mark) does: a retry takes it over
// at once instead of waiting, gets a new seq, and the lost attempt's seq is reported as a hole.
func TestRetryTakesOverAnAttemptThisNodeLost(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	holes := &holeRecorder{}
	h := e.handler(t, message.SendMessageDeps{Holes: holes}, message.SendMessageConfig{PendingWait: 5 * time.Second})
	ctx := testCtx(t)
	cmd := e.cmd(t, "grp6", 3, "lost-reply", "x")
	key := seq.Key{Tenant: cmd.Tenant, Topic: cmd.Topic, From: cmd.From, ClientMsgID: cmd.ClientMsgID}
	a := message.AllocatorOf(h)
	if err := a.Seed(ctx, []seq.TopicFloor{{Tenant: key.Tenant, Topic: key.Topic}}); err != nil {
		t.Fatal(err)
	}
	// The script ran (claim pending, seq 1 taken), but its answer never reached the handler.
	lost, err := a.MarkDoneAndAllocate(ctx, nil, []seq.Request{{Key: key, Nonce: a.NewNonce()}}, nil)
	if err != nil || lost[0].Seq != 1 {
		t.Fatalf("lost allocation = %+v, %v", lost, err)
	}
	start := time.Now()
	res, err := h.Handle(ctx, cmd)
	if err != nil {
		t.Fatalf("retry of a send whose attempt was lost: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the retry waited %v; the claim's attempt was not in flight, so it is taken over at once", took)
	}
	if res.Seq != 2 || res.Duplicate {
		t.Errorf("retry = %+v, want seq 2 (seq 1 was the lost attempt's)", res)
	}
	if got := holes.seqs(); !slices.Equal(got, []int64{1}) {
		t.Errorf("holes reported %v, want [1]", got)
	}
}

// twoNodes is node A, whose appends the test holds and whose Redis connection it can cut, and
// node B, over one event store and one Redis key prefix.
type twoNodes struct {
	e       *sendEnv
	a, b    *message.SendMessageHandler
	rdbA    *redis.Client
	gate    *gate
	holesB  *holeRecorder
	ttl     time.Duration
	cmd     message.SendMessage
	aResult chan error
}

// newTwoNodes starts the nodes; A's appends are held by the gate before the commit, or after
// it with afterCommit. A's send of cmd is then in flight.
func newTwoNodes(t *testing.T, afterCommit bool) *twoNodes {
	t.Helper()
	n := &twoNodes{e: newSendEnv(t, message.SendMessageConfig{}), gate: newGate(), holesB: &holeRecorder{}, ttl: time.Second}
	store := &hookStore{MessageStore: n.e.store}
	if afterCommit {
		store.after = func([]domain.Envelope) { n.gate.hold() }
	} else {
		store.before = func(ev []domain.Envelope) []domain.Envelope { n.gate.hold(); return ev }
	}
	n.rdbA = redis.NewClient(&redis.Options{Addr: testenv.RedisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = n.rdbA.Close() })
	cfg := func(node string) message.SendMessageConfig {
		return message.SendMessageConfig{PendingWait: 500 * time.Millisecond,
			Seq: seq.Config{NodeID: node, HeartbeatTTL: n.ttl}}
	}
	n.a = n.e.handler(t, message.SendMessageDeps{Store: store, Redis: n.rdbA}, cfg("node-a"))
	n.b = n.e.handler(t, message.SendMessageDeps{Holes: n.holesB}, cfg("node-b"))
	n.gate.releaseAtCleanup(t)
	n.cmd = n.e.cmd(t, "grp9", 4, "in-flight", "x")
	n.aResult = make(chan error, 1)
	go func() {
		_, err := n.a.Handle(testCtx(t), n.cmd)
		n.aResult <- err
	}()
	n.gate.waitEntered(t)
	return n
}

// retryOnB sends cmd on B until it is answered, and fails the test when B answers in_progress
// to an attempt that started after A's heartbeat had expired, or no answer came within 5 s of
// the kill.
func (n *twoNodes) retryOnB(t *testing.T, killed time.Time) message.SendResult {
	t.Helper()
	for {
		started := time.Now()
		res, err := n.b.Handle(testCtx(t), n.cmd)
		switch {
		case err == nil:
			if since := time.Since(killed); since > 5*time.Second {
				t.Errorf("B answered %v after A died, want within 5s", since)
			}
			return res
		case !errors.Is(err, domain.ErrInProgress):
			t.Fatalf("retry on B: %v", err)
		case started.After(killed.Add(n.ttl + 200*time.Millisecond)):
			t.Fatalf("B answered in_progress to a retry %v after A died; A's heartbeat lapsed after %v",
				started.Sub(killed).Round(time.Millisecond), n.ttl)
		case time.Since(killed) > 5*time.Second:
			t.Fatal("no answer on B within 5s of A's death")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRetryOnAnotherNodeAfterTheOwnerDied: node A claims and allocates seq 1 for a send, then
// dies before it commits (its heartbeat stops). While A lives, B waits for A's attempt and
// answers in_progress; once A's heartbeat lapses, B takes the send over and commits it at a new
// seq. A, coming back, finds the send committed and answers it as a duplicate.
func TestRetryOnAnotherNodeAfterTheOwnerDied(t *testing.T) {
	t.Parallel()
	n := newTwoNodes(t, false)
	if _, err := n.b.Handle(testCtx(t), n.cmd); !errors.Is(err, domain.ErrInProgress) {
		t.Fatalf("retry on B while A lives and holds the send = %v, want in_progress", err)
	}
	_ = n.rdbA.Close() // A dies: no more heartbeats, no done or failed mark
	killed := time.Now()
	res := n.retryOnB(t, killed)
	if res.Duplicate || res.Seq != 2 {
		t.Errorf("B's answer = %+v, want a new seq 2: A never committed seq 1", res)
	}
	if got := n.holesB.seqs(); !slices.Equal(got, []int64{1}) {
		t.Errorf("B reported holes %v, want A's seq [1]", got)
	}
	n.gate.release()
	if err := <-n.aResult; err != nil {
		t.Logf("A's own caller: %v", err) // A lost Redis; what it answers does not matter
	}
	if events := n.e.stream(t, "grp9"); len(events) != 1 || events[0].StreamVersion != 2 {
		t.Fatalf("stored %d events, want the one message at seq 2", len(events))
	}
}

// TestRetryOnAnotherNodeAfterTheOwnerCommittedAndDied: node A commits seq 1 but dies before it
// marks the claim done. B takes the send over once A's heartbeat lapses and answers with the
// original seq as a duplicate; nothing is written twice.
func TestRetryOnAnotherNodeAfterTheOwnerCommittedAndDied(t *testing.T) {
	t.Parallel()
	n := newTwoNodes(t, true)
	_ = n.rdbA.Close()
	killed := time.Now()
	res := n.retryOnB(t, killed)
	if !res.Duplicate || res.Seq != 1 {
		t.Errorf("B's answer = %+v, want A's seq 1 as a duplicate", res)
	}
	if slices.Contains(n.holesB.seqs(), 1) {
		t.Errorf("B reported seq 1, which holds the message, as a hole: %v", n.holesB.seqs())
	}
	n.gate.release()
	<-n.aResult
	if events := n.e.stream(t, "grp9"); len(events) != 1 || events[0].StreamVersion != 1 {
		t.Fatalf("stored %d events, want the one message at seq 1", len(events))
	}
}
