package message_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/domain"
)

// sent is one send and its answer.
type sent struct {
	topic string
	key   string // "<from>:<client_msg_id>"
	res   message.SendResult
}

// checkGapless asserts that a topic's stored seqs are exactly 1..n and that every answered send
// got the seq and message id stored for its client_msg_id.
func checkGapless(t *testing.T, e *sendEnv, topic string, answers []sent) {
	t.Helper()
	events := e.stream(t, topic)
	for i, ev := range events {
		if ev.StreamVersion != int64(i+1) {
			t.Fatalf("topic %s: event %d has seq %d; want exactly 1..%d", topic, i, ev.StreamVersion, len(events))
		}
	}
	stored := e.storedSeqs(t, topic)
	n := 0
	for _, a := range answers {
		if a.topic != topic {
			continue
		}
		n++
		if got := stored[a.key]; got.Seq != a.res.Seq || got.MessageID != a.res.MessageID {
			t.Errorf("topic %s %s: answered seq %d id %s, stored seq %d id %s", topic, a.key, a.res.Seq, a.res.MessageID, got.Seq, got.MessageID)
		}
	}
	if n != len(events) {
		t.Errorf("topic %s: %d sends answered, %d events stored", topic, n, len(events))
	}
}

func TestConcurrentSendersGetGaplessSeqs(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	ctx := testCtx(t)
	const senders, perSender = 50, 200
	topics := []string{"grp1", "grp2", "grp3", "grp4", "grp5"}

	answers := make([][]sent, senders)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := domain.UserID(s + 1)
			for n := range perSender {
				topic := topics[(s+n)%len(topics)]
				cmid := fmt.Sprintf("c%d", n)
				res, err := e.h.Handle(ctx, e.cmd(t, topic, from, cmid, "hello"))
				if err != nil {
					t.Errorf("sender %d message %d: %v", s, n, err)
					return
				}
				if res.Duplicate {
					t.Errorf("sender %d message %d answered as a duplicate", s, n)
				}
				answers[s] = append(answers[s], sent{topic, fmt.Sprintf("%d:%s", from, cmid), res})
			}
		}()
	}
	wg.Wait()
	var all []sent
	for _, a := range answers {
		all = append(all, a...)
	}
	if len(all) != senders*perSender {
		t.Fatalf("%d sends answered, want %d", len(all), senders*perSender)
	}
	for _, topic := range topics {
		checkGapless(t, e, topic, all)
	}
	if n := e.countEvents(t); n != senders*perSender {
		t.Errorf("%d events stored, want %d", n, senders*perSender)
	}
}

func TestRedisLosingItsKeysMidRun(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	ctx := testCtx(t)
	const senders, perSender = 20, 100
	topics := []string{"grp10", "grp11", "grp12"}

	var (
		mu         sync.Mutex
		answers    []sent
		maxBefore  = map[string]int64{} // highest seq answered before the keys were lost
		lostAt     time.Time            // when the delete finished
		after      []sent               // sends started after the delete finished
		deleteOnce sync.Once
		wg         sync.WaitGroup
	)
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := domain.UserID(s + 1)
			for n := range perSender {
				topic := topics[(s+n)%len(topics)]
				cmid := fmt.Sprintf("m%d", n)
				started := time.Now()
				res, err := e.h.Handle(ctx, e.cmd(t, topic, from, cmid, "x"))
				if err != nil {
					t.Errorf("sender %d message %d: %v", s, n, err)
					return
				}
				a := sent{topic, fmt.Sprintf("%d:%s", from, cmid), res}
				mu.Lock()
				answers = append(answers, a)
				if lostAt.IsZero() && res.Seq > maxBefore[topic] {
					maxBefore[topic] = res.Seq
				}
				if !lostAt.IsZero() && started.After(lostAt) {
					after = append(after, a)
				}
				half := len(answers) == senders*perSender/2
				mu.Unlock()
				if half {
					// Delete only this test's keys (its own prefix); FLUSHALL would break other
					// tests sharing this Redis.
					deleteOnce.Do(func() {
						mu.Lock()
						defer mu.Unlock()
						if n := e.loseRedisKeys(t); n == 0 {
							t.Error("no keys to lose")
						}
						lostAt = time.Now()
					})
				}
			}
		}()
	}
	wg.Wait()
	if len(after) == 0 {
		t.Fatal("no send started after the keys were lost")
	}
	for _, a := range after {
		if a.res.Seq <= maxBefore[a.topic] {
			t.Errorf("%s %s got seq %d after the loss, not above the earlier maximum %d", a.topic, a.key, a.res.Seq, maxBefore[a.topic])
		}
	}
	for _, topic := range topics {
		checkGapless(t, e, topic, answers)
	}

	// The counters and claims are gone again: resending early messages is answered by the event
	// store's idempotency index with the original seq, and nothing new is written.
	e.loseRedisKeys(t)
	checkResendsAreDuplicates(t, e, answers[:20])
	if n := e.countEvents(t); n != senders*perSender {
		t.Errorf("%d events stored, want %d", n, senders*perSender)
	}
}

// checkResendsAreDuplicates sends each answered message again and expects the first answer.
func checkResendsAreDuplicates(t *testing.T, e *sendEnv, answers []sent) {
	t.Helper()
	for _, a := range answers {
		var from domain.UserID
		var cmid string
		if _, err := fmt.Sscanf(a.key, "%d:%s", &from, &cmid); err != nil {
			t.Fatal(err)
		}
		res, err := e.h.Handle(testCtx(t), e.cmd(t, a.topic, from, cmid, "x"))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Duplicate || res.Seq != a.res.Seq || res.MessageID != a.res.MessageID {
			t.Errorf("resend of %s = %+v, want duplicate of %+v", a.key, res, a.res)
		}
	}
}

func TestRetriedSendIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	ctx := testCtx(t)
	cmd := e.cmd(t, "p2p7_9", 9, "retry-1", "hi")
	cmd.TraceID = "trace-abc"

	first, err := e.h.Handle(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if first.Seq != 1 || first.Duplicate || first.MessageID == "" || first.SentAt.IsZero() {
		t.Fatalf("first send = %+v, want seq 1, not duplicate", first)
	}
	again, err := e.h.Handle(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if want := first; again.Seq != want.Seq || again.MessageID != want.MessageID || !again.SentAt.Equal(want.SentAt) || !again.Duplicate {
		t.Errorf("retry = %+v, want the first send's %+v as a duplicate", again, want)
	}

	// Without the Redis claim the event store's idempotency index answers.
	if err := e.rdb.Del(ctx, e.keys.ClaimKey(seq.Key{Tenant: cmd.Tenant, Topic: cmd.Topic, From: cmd.From, ClientMsgID: cmd.ClientMsgID})).Err(); err != nil {
		t.Fatal(err)
	}
	late, err := e.h.Handle(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if late.Seq != first.Seq || late.MessageID != first.MessageID || !late.SentAt.Equal(first.SentAt) || !late.Duplicate {
		t.Errorf("retry after the claim was lost = %+v, want %+v", late, first)
	}
	if n := e.countEvents(t); n != 1 {
		t.Fatalf("%d events stored, want 1", n)
	}

	// The stored event is what DESIGN §3 and §4 promise.
	ev := e.stream(t, "p2p7_9")[0]
	p := sentPayload(t, ev)
	switch {
	case ev.EventType != domain.EventDirectMessageSent, ev.StreamID != "p2p7_9", ev.StreamVersion != 1:
		t.Errorf("event type/stream = %s %s@%d", ev.EventType, ev.StreamID, ev.StreamVersion)
	case ev.EventID.String() != first.MessageID, p.MessageID != first.MessageID, ev.EventID.Version() != 7:
		t.Errorf("event id %s (v%d), payload message id %s, answered %s", ev.EventID, ev.EventID.Version(), p.MessageID, first.MessageID)
	case ev.IdempotencyKey != "9:retry-1", ev.TraceID != "trace-abc":
		t.Errorf("idempotency key %q, trace %q", ev.IdempotencyKey, ev.TraceID)
	case ev.Actor != (domain.Actor{Type: domain.ActorUser, ID: "9"}):
		t.Errorf("actor = %+v", ev.Actor)
	case p.From != 9 || p.To != 7 || p.Seq != 1 || p.ClientMsgID != "retry-1" || p.MsgType != domain.MsgText || string(p.Content) != `"hi"`:
		t.Errorf("payload = %+v", p)
	case !p.SentAt.Equal(first.SentAt) || !ev.OccurredAt.Equal(first.SentAt):
		t.Errorf("sent_at %s, occurred_at %s, answered %s", p.SentAt, ev.OccurredAt, first.SentAt)
	}
}

func TestConcurrentIdenticalSends(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	ctx := testCtx(t)
	// Another message first, so the identical sends do not all start at seq 1.
	if _, err := e.h.Handle(ctx, e.cmd(t, "grp5", 1, "other", "x")); err != nil {
		t.Fatal(err)
	}
	cmd := e.cmd(t, "grp5", 2, "same", "x")
	const n = 10
	results := make([]message.SendResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = e.h.Handle(ctx, cmd)
		}()
	}
	close(start)
	wg.Wait()
	originals := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("send %d: %v", i, errs[i])
		}
		if results[i].Seq != results[0].Seq || results[i].MessageID != results[0].MessageID {
			t.Errorf("send %d = %+v, send 0 = %+v", i, results[i], results[0])
		}
		if !results[i].Duplicate {
			originals++
		}
	}
	if originals != 1 || results[0].Seq != 2 {
		t.Errorf("%d sends not marked duplicate (want 1); seq %d (want 2)", originals, results[0].Seq)
	}
	if got := e.countEvents(t); got != 2 {
		t.Errorf("%d events stored, want 2", got)
	}
}

// closedRedis returns a client of an address nothing listens on.
func closedRedis(t *testing.T) *redis.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func TestRedisDownFailsRetryableAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	h := e.handler(t, message.SendMessageDeps{Redis: closedRedis(t)}, message.SendMessageConfig{})
	_, err := h.Handle(testCtx(t), e.cmd(t, "grp1", 1, "m1", "x"))
	if !errors.Is(err, domain.ErrRetryable) {
		t.Fatalf("send with Redis down: %v, want ErrRetryable", err)
	}
	if n := e.countEvents(t); n != 0 {
		t.Errorf("%d events stored, want none", n)
	}
}

func TestPostgresDownFailsRetryableAndLeavesAHole(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	ctx := testCtx(t)
	pool, broken := newPostgres(t, 2)
	pool.Close() // every append through this store fails
	h := e.handler(t, message.SendMessageDeps{Store: broken}, message.SendMessageConfig{})
	cmd := e.cmd(t, "grp3", 4, "m1", "x")
	if err := e.keys.Seed(ctx, []seq.TopicFloor{{Tenant: cmd.Tenant, Topic: cmd.Topic}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Handle(ctx, cmd); !errors.Is(err, domain.ErrRetryable) {
		t.Fatalf("send with Postgres down: %v, want ErrRetryable", err)
	}
	key := seq.Key{Tenant: cmd.Tenant, Topic: cmd.Topic, From: cmd.From, ClientMsgID: cmd.ClientMsgID}
	if c, err := e.keys.Claim(ctx, key); err != nil || c.State != seq.StateFailed {
		t.Fatalf("claim after the failed append = %+v, %v; want failed", c, err)
	}
	// The same client_msg_id may be sent again; the failed attempt's seq stays a hole.
	res, err := e.h.Handle(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if res.Seq != 2 || res.Duplicate {
		t.Errorf("retry after the failure = %+v, want seq 2 (seq 1 is a hole)", res)
	}
}

func TestTakenSeqIsReseededFromTheStore(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	ctx := testCtx(t)
	if _, err := e.h.Handle(ctx, e.cmd(t, "grp8", 1, "a", "x")); err != nil {
		t.Fatal(err)
	}
	// Another writer (a node with its own view of the counter) stores seqs 2 and 3.
	topic, _ := domain.ParseTopic("grp8")
	var foreign []domain.Envelope
	for v := int64(2); v <= 3; v++ {
		ev, err := domain.NewEnvelope(e.tenant, "grp8", v, domain.EventGroupMessageSent,
			domain.Actor{Type: domain.ActorUser, ID: "5"}, domain.MessageSent{Topic: "grp8", Seq: v, From: 5})
		if err != nil {
			t.Fatal(err)
		}
		foreign = append(foreign, ev)
	}
	if _, err := e.store.AppendBatch(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	// And this node's counter went back (a failover to a stale replica).
	if err := e.rdb.Set(ctx, e.keys.CounterKey(e.tenant, topic), 0, 0).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := e.h.Handle(ctx, e.cmd(t, "grp8", 1, "b", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Seq != 4 {
		t.Errorf("send after the seq was taken got seq %d, want 4", res.Seq)
	}
	if n := e.countEvents(t); n != 4 {
		t.Errorf("%d events stored, want 4", n)
	}
}

func TestCloseFinishesQueuedSends(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{Partitions: 2})
	ctx := testCtx(t)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		answered []int64
		closed   int
	)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.h.Handle(ctx, e.cmd(t, "grp1", domain.UserID(i+1), "m", "x"))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				answered = append(answered, res.Seq)
			case errors.Is(err, message.ErrClosed) && errors.Is(err, domain.ErrRetryable):
				closed++
			default:
				t.Errorf("send %d: %v", i, err)
			}
		}()
	}
	time.Sleep(5 * time.Millisecond)
	if err := e.h.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if int64(len(answered)) != e.countEvents(t) || len(answered)+closed != 40 {
		t.Errorf("%d answered, %d refused as closed, %d stored", len(answered), closed, e.countEvents(t))
	}
	sort.Slice(answered, func(i, j int) bool { return answered[i] < answered[j] })
	for i, s := range answered {
		if s != int64(i+1) {
			t.Fatalf("answered seqs %v are not 1..n", answered)
		}
	}
	if _, err := e.h.Handle(ctx, e.cmd(t, "grp1", 1, "late", "x")); !errors.Is(err, message.ErrClosed) {
		t.Errorf("send after Close: %v, want ErrClosed", err)
	}
}

// denyAll refuses every send.
type denyAll struct{}

func (denyAll) CanSend(context.Context, domain.TenantID, domain.UserID, domain.Topic) error {
	return domain.Deny("not_member")
}

func TestPolicyRefusalWritesNothing(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	h := e.handler(t, message.SendMessageDeps{Policy: denyAll{}}, message.SendMessageConfig{})
	_, err := h.Handle(testCtx(t), e.cmd(t, "grp1", 1, "m", "x"))
	var denied *domain.DeniedError
	if !errors.As(err, &denied) || denied.Reason != "not_member" {
		t.Fatalf("send refused by policy: %v, want DeniedError not_member", err)
	}
	if n, keys := e.countEvents(t), e.redisKeys(t); n != 0 || len(keys) != 0 {
		t.Errorf("refused send wrote %d events and Redis keys %v", n, keys)
	}
}

// Under light traffic a send's done mark waits for the next send's allocation round trip, up to
// DoneLinger, and is written alone when none comes.
func TestDoneMarksRideWithTheNextSend(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{Partitions: 1, DoneLinger: 2 * time.Second})
	ctx := testCtx(t)
	claim := func(cmd message.SendMessage) seq.State {
		t.Helper()
		c, err := e.keys.Claim(ctx, seq.Key{Tenant: cmd.Tenant, Topic: cmd.Topic, From: cmd.From, ClientMsgID: cmd.ClientMsgID})
		if err != nil {
			t.Fatal(err)
		}
		return c.State
	}
	a, b := e.cmd(t, "p2p7_9", 9, "linger-a", "a"), e.cmd(t, "p2p7_9", 9, "linger-b", "b")
	if _, err := e.h.Handle(ctx, a); err != nil {
		t.Fatal(err)
	}
	if s := claim(a); s != seq.StatePending {
		t.Fatalf("first send's claim right after its answer: %s, want pending (its mark waits for the next send)", s)
	}
	start := time.Now()
	if _, err := e.h.Handle(ctx, b); err != nil {
		t.Fatal(err)
	}
	if s := claim(a); s != seq.StateDone {
		t.Fatalf("first send's claim after the second send: %s, want done (marked in the second's round trip)", s)
	}
	if s := claim(b); s != seq.StatePending && time.Since(start) < 2*time.Second {
		t.Fatalf("second send's claim right after its answer: %s, want pending", s)
	}
	deadline := time.Now().Add(10 * time.Second)
	for claim(b) != seq.StateDone {
		if time.Now().After(deadline) {
			t.Fatal("the last send's claim was never marked done")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if waited := time.Since(start); waited < 1500*time.Millisecond {
		t.Errorf("the last send's mark came after %s, want about DoneLinger (2s)", waited)
	}
}
