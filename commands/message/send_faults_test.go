package message_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/domain"
)

// hookStore is the real event store with hooks around AppendBatch: before may rewrite the
// events or hold the call, after runs once the real append returned (it may hold the call
// after the commit). It records the size of every call.
type hookStore struct {
	message.MessageStore
	before func(events []domain.Envelope) []domain.Envelope
	after  func(events []domain.Envelope)

	mu    sync.Mutex
	calls []int
}

func (s *hookStore) AppendBatch(ctx context.Context, events []domain.Envelope) ([]eventstore.AppendResult, error) {
	s.mu.Lock()
	s.calls = append(s.calls, len(events))
	s.mu.Unlock()
	if s.before != nil {
		events = s.before(events)
	}
	res, err := s.MessageStore.AppendBatch(ctx, events)
	if s.after != nil {
		s.after(events)
	}
	return res, err
}

func (s *hookStore) callSizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// gate holds calls until it is opened; entered is signalled by each call that arrives.
type gate struct {
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}, 1000), open: make(chan struct{})}
}

// releaseAtCleanup opens g when the test ends, before the handlers made so far close (they
// wait for the calls g holds).
func (g *gate) releaseAtCleanup(t *testing.T) { t.Cleanup(g.release) }

func (g *gate) hold()    { g.entered <- struct{}{}; <-g.open }
func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func (g *gate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no append reached the gate")
	}
}

// commitRecorder is a CommitListener that records what it hears.
type commitRecorder struct {
	mu   sync.Mutex
	msgs []message.CommittedMessage
}

func (r *commitRecorder) MessagesCommitted(_ context.Context, msgs []message.CommittedMessage) {
	r.mu.Lock()
	r.msgs = append(r.msgs, msgs...)
	r.mu.Unlock()
}

func (r *commitRecorder) snapshot() []message.CommittedMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

// holeRecorder is a HoleRecorder that records the seqs it hears about.
type holeRecorder struct {
	mu    sync.Mutex
	holes []int64
}

func (r *holeRecorder) SeqsAbandoned(_ context.Context, holes []message.AbandonedSeq) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range holes {
		r.holes = append(r.holes, h.Seq)
	}
}

func (r *holeRecorder) seqs() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.holes))
}

func waitUntil(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStoreRefusalFailsOnlyTheBadSend puts a message the event store refuses (its payload is
// made unstorable below the domain check) into a batch with eight good ones: the eight commit
// and are acked, the bad one alone is refused with a non-retryable 400 reason, its claim is
// marked failed so it may be sent again, and its seq is reported as a hole.
func TestStoreRefusalFailsOnlyTheBadSend(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	g := newGate()
	var (
		corrupt = true
		mu      sync.Mutex
		first   = true
	)
	store := &hookStore{MessageStore: e.store, before: func(events []domain.Envelope) []domain.Envelope {
		mu.Lock()
		holdIt, spoil := first, corrupt
		first = false
		mu.Unlock()
		if holdIt {
			g.hold()
		}
		out := slices.Clone(events)
		for i := range out {
			if spoil && bytes.Contains(out[i].Payload, []byte(`"content":"BAD"`)) {
				// PostgreSQL's jsonb refuses \u0000: the whole statement fails.
				out[i].Payload = bytes.Replace(out[i].Payload, []byte(`"content":"BAD"`), []byte(`"content":"\u0000"`), 1)
			}
		}
		return out
	}}
	listener, holes := &commitRecorder{}, &holeRecorder{}
	h := e.handler(t, message.SendMessageDeps{Store: store, Listener: listener, Holes: holes}, message.SendMessageConfig{Partitions: 1})
	g.releaseAtCleanup(t)
	ctx := testCtx(t)

	// The first send holds the partition, so the next ones queue up and form one batch.
	firstDone := make(chan error, 1)
	go func() {
		_, err := h.Handle(ctx, e.cmd(t, "grp1", 100, "first", "x"))
		firstDone <- err
	}()
	g.waitEntered(t)
	const good = 8
	type answer struct {
		res message.SendResult
		err error
	}
	answers := make([]answer, good+1) // the last is the bad one
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text, topic := fmt.Sprintf("good %d", i), []string{"grp1", "grp2"}[i%2]
			if i == good {
				text = "BAD"
			}
			answers[i].res, answers[i].err = h.Handle(ctx, e.cmd(t, topic, domain.UserID(i+1), "m", text))
		}()
	}
	waitUntil(t, "every send to queue", 10*time.Second, func() bool { return message.Queued(h) == good+1 })
	g.release()
	wg.Wait()
	if err := <-firstDone; err != nil {
		t.Fatalf("first send: %v", err)
	}

	if calls := store.callSizes(); len(calls) < 3 || calls[1] != good+1 {
		t.Fatalf("append calls of sizes %v: want the nine sends in one batch, then its halves", calls)
	}
	for i, a := range answers[:good] {
		if a.err != nil || a.res.Seq <= 0 || a.res.Duplicate {
			t.Errorf("good send %d = %+v, %v; want committed", i, a.res, a.err)
		}
	}
	bad := answers[good]
	var ve *domain.ValidationError
	if !errors.As(bad.err, &ve) || ve.Field != "message" || ve.Reason != message.ReasonRejectedByStore || errors.Is(bad.err, domain.ErrRetryable) {
		t.Fatalf("bad send = %v, want a non-retryable message/%s", bad.err, message.ReasonRejectedByStore)
	}
	if n := e.countEvents(t); n != good+1 {
		t.Errorf("%d events stored, want the first and the %d good ones", n, good)
	}
	if got := len(listener.snapshot()); got != good+1 {
		t.Errorf("the commit listener heard %d messages, want %d", got, good+1)
	}
	badCmd := e.cmd(t, "grp1", good+1, "m", "BAD")
	key := seq.Key{Tenant: badCmd.Tenant, Topic: badCmd.Topic, From: badCmd.From, ClientMsgID: badCmd.ClientMsgID}
	c, err := e.keys.Claim(ctx, key)
	if err != nil || c.State != seq.StateFailed {
		t.Fatalf("claim of the refused send = %+v, %v; want failed", c, err)
	}
	stored := map[int64]bool{}
	for _, r := range e.storedSeqs(t, "grp1") {
		stored[r.Seq] = true
	}
	var holeSeq int64
	for s := int64(1); holeSeq == 0 && s <= int64(len(stored))+1; s++ {
		if !stored[s] {
			holeSeq = s
		}
	}
	if got := holes.seqs(); len(got) != 1 || got[0] != holeSeq {
		t.Errorf("holes reported %v, want the refused send's seq %d", got, holeSeq)
	}

	// Fixed, the same client_msg_id is sent again and gets a new seq.
	mu.Lock()
	corrupt = false
	mu.Unlock()
	res, err := h.Handle(ctx, badCmd)
	if err != nil || res.Duplicate || res.Seq == holeSeq {
		t.Fatalf("resend of the refused message = %+v, %v; want a new seq", res, err)
	}
}

// TestSendCommittedAfterItsCallerLeftIsDeliveredOnce delays the append past the caller's
// deadline: the caller gets its context's error, the message commits all the same and reaches
// the commit listener once, and the retry answers duplicate without a second delivery.
func TestSendCommittedAfterItsCallerLeftIsDeliveredOnce(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	store := &hookStore{MessageStore: e.store, before: func(events []domain.Envelope) []domain.Envelope {
		time.Sleep(400 * time.Millisecond)
		return events
	}}
	listener := &commitRecorder{}
	h := e.handler(t, message.SendMessageDeps{Store: store, Listener: listener}, message.SendMessageConfig{})
	cmd := e.cmd(t, "grp3", 7, "late", "hello")
	ctx, cancel := context.WithTimeout(testCtx(t), 100*time.Millisecond)
	defer cancel()
	if _, err := h.Handle(ctx, cmd); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send whose caller left = %v, want the deadline", err)
	}
	waitUntil(t, "the message to be committed and heard", 10*time.Second, func() bool { return len(listener.snapshot()) == 1 })
	m := listener.snapshot()[0]
	if m.Seq != 1 || m.From != 7 || m.Topic != cmd.Topic || string(m.Content.Raw()) != `"hello"` || m.MessageID == "" {
		t.Errorf("heard %+v", m)
	}
	res, err := h.Handle(testCtx(t), cmd)
	if err != nil || !res.Duplicate || res.Seq != 1 || res.MessageID != m.MessageID {
		t.Fatalf("retry = %+v, %v; want a duplicate of seq 1", res, err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(listener.snapshot()); n != 1 {
		t.Errorf("the commit listener heard %d messages, want 1: a duplicate is never delivered again", n)
	}
}

// panicky is a CommitListener that panics.
type panicky struct{}

func (panicky) MessagesCommitted(context.Context, []message.CommittedMessage) { panic("listener bug") }

func TestPanickingListenerDoesNotStopThePartition(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	h := e.handler(t, message.SendMessageDeps{Listener: panicky{}}, message.SendMessageConfig{Partitions: 1})
	for i := range 3 {
		if res, err := h.Handle(testCtx(t), e.cmd(t, "grp1", 1, fmt.Sprint("m", i), "x")); err != nil || res.Seq != int64(i+1) {
			t.Fatalf("send %d after a panicking listener = %+v, %v", i, res, err)
		}
	}
}

// TestCloseDoesNotWaitForCallersBlockedOnAFullQueue holds the only partition in an append and
// fills its one-slot queue: a caller waiting for room gives up when its context ends, and once
// Close starts, callers waiting (or arriving) are refused at once while the held batch still
// commits.
func TestCloseDoesNotWaitForCallersBlockedOnAFullQueue(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	g := newGate()
	var once sync.Once
	store := &hookStore{MessageStore: e.store, before: func(events []domain.Envelope) []domain.Envelope {
		once.Do(g.hold)
		return events
	}}
	h := e.handler(t, message.SendMessageDeps{Store: store}, message.SendMessageConfig{Partitions: 1, MaxBatch: 1, QueueSize: 1})
	g.releaseAtCleanup(t)
	ctx := testCtx(t)
	results := make(chan error, 2)
	go func() { _, err := h.Handle(ctx, e.cmd(t, "grp1", 1, "held", "x")); results <- err }()
	g.waitEntered(t)
	go func() { _, err := h.Handle(ctx, e.cmd(t, "grp1", 2, "queued", "x")); results <- err }()
	waitUntil(t, "the queue to fill", 5*time.Second, func() bool { return message.Queued(h) == 1 })

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := h.Handle(short, e.cmd(t, "grp1", 3, "impatient", "x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send into a full queue = %v, want its deadline", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("a caller whose context ended waited %v", took)
	}

	blocked := make(chan error, 1)
	go func() { _, err := h.Handle(ctx, e.cmd(t, "grp1", 4, "blocked", "x")); blocked <- err }()
	time.Sleep(50 * time.Millisecond) // let it reach the full queue
	closed := make(chan struct{})
	go func() {
		_ = h.Close()
		close(closed)
	}()
	select {
	case err := <-blocked:
		if !errors.Is(err, message.ErrClosed) || !errors.Is(err, domain.ErrRetryable) {
			t.Errorf("caller waiting for room after Close = %v, want retryable ErrClosed", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a caller waiting for room still waits after Close started")
	}
	lateDone := make(chan error, 1)
	go func() { _, err := h.Handle(ctx, e.cmd(t, "grp1", 5, "late", "x")); lateDone <- err }()
	select {
	case err := <-lateDone:
		if !errors.Is(err, message.ErrClosed) {
			t.Errorf("send after Close started = %v, want ErrClosed", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a send arriving during Close blocked")
	}
	select {
	case <-closed:
		t.Fatal("Close returned while a batch was still held")
	default:
	}
	g.release()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after the held batch finished")
	}
	for range 2 {
		if err := <-results; err != nil {
			t.Errorf("a send queued before Close: %v, want committed", err)
		}
	}
	if n := e.countEvents(t); n != 2 {
		t.Errorf("%d events stored, want the held and the queued send", n)
	}
}
