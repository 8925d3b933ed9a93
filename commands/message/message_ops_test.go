package message_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
)

// opsEnv is a migrated event store with sent messages appended directly to a topic stream.
type opsEnv struct {
	tenant domain.TenantID
	topic  domain.Topic
	store  *eventstore.Store
	h      *message.MessageOpsHandler
}

const alice, bob = domain.UserID(11), domain.UserID(22)

func newOpsEnv(t *testing.T, cfg message.MessageOpsConfig) *opsEnv {
	t.Helper()
	_, store := newPostgres(t, 8)
	h, err := message.NewMessageOpsHandler(message.MessageOpsDeps{Store: store}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	topic, _ := domain.GroupTopic(77)
	return &opsEnv{tenant: domain.MustTenantID("ops"), topic: topic, store: store, h: h}
}

// send appends a sent event from `from` at the next seq and returns the seq.
func (e *opsEnv) send(t *testing.T, from domain.UserID, text string) int64 {
	t.Helper()
	ctx := testCtx(t)
	last, err := e.store.LastVersion(ctx, e.tenant, e.topic.String())
	if err != nil {
		t.Fatal(err)
	}
	content, _ := domain.TextContent(text, 0)
	p := domain.MessageSent{MessageID: uuid.NewString(), Topic: e.topic.String(), GroupID: e.topic.GroupID(),
		Seq: last + 1, From: from, ClientMsgID: uuid.NewString(), MsgType: domain.MsgText, Content: content.Raw(),
		SentAt: time.Now().UTC()}
	env, err := domain.NewEnvelope(e.tenant, e.topic.String(), last+1, domain.EventGroupMessageSent,
		domain.Actor{Type: domain.ActorUser, ID: from.String()}, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Append(ctx, e.tenant, e.topic.String(), last, []domain.Envelope{env}); err != nil {
		t.Fatal(err)
	}
	return last + 1
}

func (e *opsEnv) ref(seq int64, actor domain.UserID) message.MessageRef {
	return message.MessageRef{Tenant: e.tenant, Topic: e.topic, Seq: seq, Actor: actor}
}

// opsEvents returns the event types of a message's operations stream.
func (e *opsEnv) opsEvents(t *testing.T, seq int64) []domain.EventType {
	t.Helper()
	evs, err := e.store.ReadStream(testCtx(t), e.tenant, domain.MessageOpsStreamID(e.topic, seq), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]domain.EventType, len(evs))
	for i, ev := range evs {
		out[i] = ev.EventType
	}
	return out
}

func deniedReason(err error) string {
	var d *domain.DeniedError
	if errors.As(err, &d) {
		return d.Reason
	}
	return ""
}

func TestRecallRules(t *testing.T) {
	t.Parallel()
	e := newOpsEnv(t, message.MessageOpsConfig{})
	ctx := testCtx(t)
	seq := e.send(t, alice, "hello")

	if _, err := e.h.Recall(ctx, e.ref(seq, bob)); deniedReason(err) != message.ReasonNotSender {
		t.Fatalf("recall by another user: %v, want %s", err, message.ReasonNotSender)
	}
	if _, err := e.h.Recall(ctx, e.ref(seq+5, alice)); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("recall of an unknown seq: %v, want ErrNotFound", err)
	}
	res, err := e.h.Recall(ctx, e.ref(seq, alice))
	if err != nil {
		t.Fatal(err)
	}
	if res.Seq != seq || res.MessageID == "" {
		t.Fatalf("recall result %+v", res)
	}
	if _, err := e.h.Recall(ctx, e.ref(seq, alice)); deniedReason(err) != message.ReasonAlreadyRecalled {
		t.Fatalf("second recall: %v, want %s", err, message.ReasonAlreadyRecalled)
	}
	if got := e.opsEvents(t, seq); len(got) != 1 || got[0] != domain.EventGroupMessageRecalled {
		t.Fatalf("operations stream %v, want one recall", got)
	}
}

func TestRecallWindow(t *testing.T) {
	t.Parallel()
	e := newOpsEnv(t, message.MessageOpsConfig{RecallWindow: time.Millisecond, EditWindow: time.Millisecond})
	ctx := testCtx(t)
	seq := e.send(t, alice, "hello")
	time.Sleep(5 * time.Millisecond)
	if _, err := e.h.Recall(ctx, e.ref(seq, alice)); deniedReason(err) != message.ReasonRecallExpired {
		t.Fatalf("late recall: %v, want %s", err, message.ReasonRecallExpired)
	}
	content, _ := domain.TextContent("late", 0)
	_, err := e.h.Edit(ctx, message.EditMessage{MessageRef: e.ref(seq, alice), Version: 1, Content: content})
	if deniedReason(err) != message.ReasonEditExpired {
		t.Fatalf("late edit: %v, want %s", err, message.ReasonEditExpired)
	}
	if got := e.opsEvents(t, seq); len(got) != 0 {
		t.Fatalf("refused commands wrote %v", got)
	}
}

func TestEditVersions(t *testing.T) {
	t.Parallel()
	e := newOpsEnv(t, message.MessageOpsConfig{})
	ctx := testCtx(t)
	seq := e.send(t, alice, "v1")
	v2, _ := domain.TextContent("v2", 0)

	if _, err := e.h.Edit(ctx, message.EditMessage{MessageRef: e.ref(seq, bob), Version: 1, Content: v2}); deniedReason(err) != message.ReasonNotSender {
		t.Fatalf("edit by another user: %v", err)
	}
	res, err := e.h.Edit(ctx, message.EditMessage{MessageRef: e.ref(seq, alice), Version: 1, Content: v2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 2 {
		t.Fatalf("version after first edit = %d, want 2", res.Version)
	}
	// An editor who still saw version 1 loses.
	if _, err := e.h.Edit(ctx, message.EditMessage{MessageRef: e.ref(seq, alice), Version: 1, Content: v2}); !errors.Is(err, domain.ErrConcurrency) {
		t.Fatalf("stale edit: %v, want ErrConcurrency", err)
	}
	// Ten editors racing on version 2: exactly one wins.
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _ := domain.TextContent("race", 0)
			_, err := e.h.Edit(ctx, message.EditMessage{MessageRef: e.ref(seq, alice), Version: 2, Content: c})
			switch {
			case err == nil:
				mu.Lock()
				wins++
				mu.Unlock()
			case !errors.Is(err, domain.ErrConcurrency):
				t.Errorf("racing edit: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d racing edits won, want 1", wins)
	}
	if _, err := e.h.Recall(ctx, e.ref(seq, alice)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.Edit(ctx, message.EditMessage{MessageRef: e.ref(seq, alice), Version: 3, Content: v2}); deniedReason(err) != message.ReasonAlreadyRecalled {
		t.Fatalf("edit after recall: %v", err)
	}
	got := e.opsEvents(t, seq)
	want := []domain.EventType{domain.EventGroupMessageEdited, domain.EventGroupMessageEdited, domain.EventGroupMessageRecalled}
	if len(got) != len(want) {
		t.Fatalf("operations %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("operations %v, want %v", got, want)
		}
	}
}

func TestDeleteForMe(t *testing.T) {
	t.Parallel()
	e := newOpsEnv(t, message.MessageOpsConfig{})
	ctx := testCtx(t)
	seq := e.send(t, alice, "hi")
	if _, err := e.h.DeleteForMe(ctx, e.ref(seq, bob)); err != nil {
		t.Fatal(err)
	}
	evs, err := e.store.ReadStream(ctx, e.tenant, domain.DeletionsStreamID(e.topic, bob), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Fatalf("%d deletion events, want 1", len(evs))
	}
	var p domain.MessageDeletedForUser
	if err := evs[0].Decode(&p); err != nil || p.User != bob || p.Seq != seq {
		t.Fatalf("deletion payload %+v (%v)", p, err)
	}
	if _, err := e.h.DeleteForMe(ctx, e.ref(seq+1, bob)); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("delete of a missing message: %v", err)
	}
	// In a 1:1 topic only the two parties may act.
	direct, _ := domain.DirectTopic(alice, bob)
	_, err = e.h.DeleteForMe(ctx, message.MessageRef{Tenant: e.tenant, Topic: direct, Seq: 1, Actor: 99})
	var ve *domain.ValidationError
	if !errors.As(err, &ve) || ve.Reason != "not_party" {
		t.Fatalf("outsider delete: %v", err)
	}
}

func TestMarkReadOnlyMovesForward(t *testing.T) {
	t.Parallel()
	e := newOpsEnv(t, message.MessageOpsConfig{})
	ctx := testCtx(t)
	for range 5 {
		e.send(t, alice, "m")
	}
	mark := func(read, recv int64) (message.MarkResult, error) {
		return e.h.MarkRead(ctx, message.MarkRead{Tenant: e.tenant, Topic: e.topic, User: bob, ReadSeq: read, RecvSeq: recv})
	}
	if r, err := mark(3, 0); err != nil || !r.Changed || r.ReadSeq != 3 || r.RecvSeq != 3 {
		t.Fatalf("mark 3: %+v %v", r, err)
	}
	if r, err := mark(2, 0); err != nil || r.Changed || r.ReadSeq != 3 {
		t.Fatalf("mark backwards: %+v %v", r, err)
	}
	if r, err := mark(0, 5); err != nil || !r.Changed || r.ReadSeq != 3 || r.RecvSeq != 5 {
		t.Fatalf("recv 5: %+v %v", r, err)
	}
	_, err := mark(9, 0)
	var ve *domain.ValidationError
	if !errors.As(err, &ve) || ve.Reason != "beyond_last_seq" {
		t.Fatalf("mark beyond last seq: %v", err)
	}
	evs, err := e.store.ReadStream(ctx, e.tenant, domain.ReadMarksStreamID(e.topic, bob), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 {
		t.Fatalf("%d read-mark events, want 2 (no-ops append nothing)", len(evs))
	}
	var last domain.ReadMarked
	_ = json.Unmarshal(evs[1].Payload, &last)
	if last.ReadSeq != 3 || last.RecvSeq != 5 {
		t.Fatalf("last mark %+v", last)
	}
}

// A seq given up with a seq-skip marker holds no message: recalling, editing or deleting it is
// not found.
func TestMessageOpsOnASkippedSeqAreNotFound(t *testing.T) {
	t.Parallel()
	e := newOpsEnv(t, message.MessageOpsConfig{})
	ctx := testCtx(t)
	seq := e.send(t, alice, "one") + 1
	if _, err := e.store.AppendSkips(ctx, []eventstore.Skip{{Tenant: e.tenant, Topic: e.topic, Seq: seq, Reason: domain.SkipAbandoned}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.Recall(ctx, e.ref(seq, alice)); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("recall of a skipped seq: %v, want ErrNotFound", err)
	}
	if _, err := e.h.DeleteForMe(ctx, e.ref(seq, bob)); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("delete of a skipped seq: %v, want ErrNotFound", err)
	}
}

// readLog is a ReadListener that remembers the read marks it heard.
type readLog struct {
	mu  sync.Mutex
	got []int64
}

func (l *readLog) ReadMarked(_ context.Context, r message.CommittedRead) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, r.ReadSeq)
}

// TestReadListenerHearsReadMarksThatMoved checks that the ReadListener hears each read mark that
// moved forward, once, with the mark after the command, and nothing for a mark that did not move
// or for a receive mark alone.
func TestReadListenerHearsReadMarksThatMoved(t *testing.T) {
	t.Parallel()
	e := newOpsEnv(t, message.MessageOpsConfig{})
	reads := &readLog{}
	h, err := message.NewMessageOpsHandler(message.MessageOpsDeps{Store: e.store, Reads: reads}, message.MessageOpsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for range 5 {
		e.send(t, alice, "m")
	}
	for _, m := range []struct{ read, recv int64 }{{2, 0}, {1, 0}, {0, 4}, {2, 0}, {5, 0}} {
		if _, err := h.MarkRead(ctx, message.MarkRead{Tenant: e.tenant, Topic: e.topic, User: bob, ReadSeq: m.read, RecvSeq: m.recv}); err != nil {
			t.Fatal(err)
		}
	}
	reads.mu.Lock()
	defer reads.mu.Unlock()
	if want := []int64{2, 5}; !slices.Equal(reads.got, want) {
		t.Fatalf("heard read marks %v, want %v", reads.got, want)
	}
}
