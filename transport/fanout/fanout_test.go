package fanout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/presence"
)

var acme = domain.MustTenantID("acme")

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recorder is a node's local sessions: it records what was delivered.
type recorder struct {
	mu   sync.Mutex
	msgs []*fanout.Message
}

func (r *recorder) Deliver(m *fanout.Message) {
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
}

func (r *recorder) snapshot() []*fanout.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

// node is one node's presence store, fanout and recorded deliveries.
type node struct {
	id   string
	pres *presence.Store
	fan  *fanout.Fanout
	got  *recorder
}

func newNode(t *testing.T, rdb *redis.Client, prefix, id string) *node {
	return newNodeWorkers(t, rdb, prefix, id, 1)
}

func newNodeWorkers(t *testing.T, rdb *redis.Client, prefix, id string, workers int) *node {
	t.Helper()
	pres, err := presence.New(presence.Deps{Redis: rdb}, presence.Config{KeyPrefix: prefix, NodeID: id})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{id: id, pres: pres, got: &recorder{}}
	n.fan, err = fanout.New(fanout.Deps{Redis: rdb, Nodes: pres, Local: n.got}, fanout.Config{KeyPrefix: prefix, NodeID: id, Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.fan.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.fan.Close() })
	return n
}

// join puts user online in topic on n.
func (n *node) join(t *testing.T, user domain.UserID, topic domain.Topic) {
	t.Helper()
	ctx := testCtx(t)
	s, err := n.pres.Login(ctx, presence.LoginInfo{Tenant: acme, User: user, SessionID: fmt.Sprintf("%s-%d", n.id, user)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Join(ctx, topic); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPublishReachesNodesWithMembersOnceAndInOrder(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	grp1, _ := domain.GroupTopic(1)
	grp2, _ := domain.GroupTopic(2)
	a := newNodeWorkers(t, rdb, prefix, "node-a", 4)
	b := newNodeWorkers(t, rdb, prefix, "node-b", 4)
	c := newNodeWorkers(t, rdb, prefix, "node-c", 4)
	a.join(t, 1, grp1)
	b.join(t, 2, grp1)
	b.join(t, 3, grp1) // two members on b: still one copy per message
	c.join(t, 4, grp2) // c is online, but not in grp1

	// Content that JSON re-encoding would change: spacing, a newline, HTML characters.
	const n = 500
	content := func(i int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf("{\"text\": \"<b>%d</b> & co\",\n  \"n\" : %d }", i, i))
	}
	sentAt := time.Now().UTC().Truncate(time.Millisecond)
	head := &domain.Head{Mentions: []domain.UserID{2}, ReplySeq: 3}
	for i := 1; i <= n; i++ {
		a.fan.Publish(&fanout.Message{Kind: fanout.KindData, Tenant: acme, Topic: grp1, From: 1, Seq: int64(i),
			MessageID: fmt.Sprintf("m-%d", i), MsgType: domain.MsgText, Head: head, TS: sentAt, Content: content(i)})
	}
	waitFor(t, "node b to receive every message", func() bool { return len(b.got.snapshot()) >= n })

	if got := len(a.got.snapshot()); got != n {
		t.Errorf("node a delivered %d messages locally, want %d", got, n)
	}
	// A note to grp2, where c has a member, after the burst; once c has it (and a little
	// later), a grp1 message wrongly sent to c would have arrived too.
	a.join(t, 1, grp2)
	a.fan.Publish(&fanout.Message{Kind: fanout.KindInfo, Tenant: acme, Topic: grp2, From: 1, What: "kp", SkipSession: "node-a-1"})
	waitFor(t, "node c to receive the grp2 note", func() bool { return len(c.got.snapshot()) == 1 })
	time.Sleep(50 * time.Millisecond)

	got := b.got.snapshot()
	if len(got) != n {
		t.Fatalf("node b received %d messages, want exactly %d", len(got), n)
	}
	for i, m := range got {
		seq := int64(i + 1)
		switch {
		case m.Seq != seq:
			t.Fatalf("message %d has seq %d: out of order", i, m.Seq)
		case string(m.Content) != string(content(i+1)):
			t.Fatalf("seq %d content = %q, want %q byte for byte", seq, m.Content, content(i+1))
		case m.Kind != fanout.KindData || m.Tenant != acme || m.Topic != grp1 || m.From != 1 ||
			m.MessageID != fmt.Sprintf("m-%d", seq) || m.MsgType != domain.MsgText || !m.TS.Equal(sentAt):
			t.Fatalf("seq %d = %+v", seq, m)
		case m.Head == nil || !slices.Equal(m.Head.Mentions, head.Mentions) || m.Head.ReplySeq != 3:
			t.Fatalf("seq %d head = %+v", seq, m.Head)
		}
	}
	note := c.got.snapshot()[0]
	if note.Kind != fanout.KindInfo || note.What != "kp" || note.Topic != grp2 || note.SkipSession != "node-a-1" || note.Content != nil {
		t.Errorf("note = %+v", note)
	}
	if len(b.got.snapshot()) != n {
		t.Errorf("node b received the grp2 note; it has no member there")
	}
}

func TestNodesWithoutMembersGetNothing(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	grp, _ := domain.GroupTopic(7)
	marker, _ := domain.GroupTopic(8)
	a := newNode(t, rdb, prefix, "node-a")
	b := newNode(t, rdb, prefix, "node-b")
	b.join(t, 3, marker)
	// Nobody is online in grp7: a delivers locally (its hub decides who gets it) and publishes
	// nothing. A note to grp8, where b has a member, follows it through a's worker; with one
	// worker per node here, once b has the note, a is done with seq 1.
	a.fan.Publish(&fanout.Message{Kind: fanout.KindData, Tenant: acme, Topic: grp, From: 1, Seq: 1, Content: json.RawMessage(`"x"`)})
	a.fan.Publish(&fanout.Message{Kind: fanout.KindInfo, Tenant: acme, Topic: marker, From: 1, What: "kp"})
	waitFor(t, "node b to receive the marker", func() bool { return len(b.got.snapshot()) >= 1 })
	b.join(t, 2, grp)
	a.fan.Publish(&fanout.Message{Kind: fanout.KindData, Tenant: acme, Topic: grp, From: 1, Seq: 2, Content: json.RawMessage(`"y"`)})
	waitFor(t, "node b to receive seq 2", func() bool { return len(b.got.snapshot()) >= 2 })
	time.Sleep(50 * time.Millisecond)
	got := b.got.snapshot()
	if len(got) != 2 || got[0].Topic != marker || got[1].Seq != 2 {
		t.Fatalf("node b received %d messages, want the marker and seq 2 only", len(got))
	}
	if n := len(a.got.snapshot()); n != 3 {
		t.Errorf("node a delivered %d locally, want 3", n)
	}
}

func TestStartFailsWithoutRedis(t *testing.T) {
	t.Parallel()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	pres, err := presence.New(presence.Deps{Redis: dead}, presence.Config{NodeID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := fanout.New(fanout.Deps{Redis: dead, Nodes: pres, Local: &recorder{}}, fanout.Config{NodeID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Second)
	defer cancel()
	if err := f.Start(ctx); err == nil {
		t.Fatal("Start succeeded without Redis")
	}
	f.Publish(&fanout.Message{Kind: fanout.KindInfo, Tenant: acme, Topic: mustTopic(t, "grp1"), What: "kp"})
	if err := f.Close(); err != nil {
		t.Errorf("Close after a failed Start: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	if err := (fanout.Config{}).Validate(); err == nil {
		t.Error("Validate without a node id succeeded")
	}
	if err := (fanout.Config{NodeID: "n1", Workers: -1}).Validate(); err == nil {
		t.Error("Validate with negative workers succeeded")
	}
	if err := (fanout.Config{NodeID: "n1"}).Validate(); err != nil {
		t.Error(err)
	}
	if got := fanout.Channel("im:", "n1"); got != "im:node:n1:fanout" {
		t.Errorf("Channel = %q", got)
	}
}

func mustTopic(t *testing.T, s string) domain.Topic {
	t.Helper()
	topic, err := domain.ParseTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	return topic
}
