package ws_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/ws"
)

// slowOnce is the event store with its first append held for delay.
type slowOnce struct {
	message.MessageStore
	delay time.Duration
	once  sync.Once
}

func (s *slowOnce) AppendBatch(ctx context.Context, events []domain.Envelope) ([]eventstore.AppendResult, error) {
	s.once.Do(func() { time.Sleep(s.delay) })
	return s.MessageStore.AppendBatch(ctx, events)
}

// TestPubWhoseCallerTimedOutIsDeliveredOnce holds the first append past the pub's request
// timeout: the sender is answered 503 retry, yet the message commits and reaches every online
// member, on this node and the other, exactly once; the retry is acked as a duplicate and
// delivers nothing more.
func TestPubWhoseCallerTimedOutIsDeliveredOnce(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.node(t, "node-a", nodeOpts{cfg: ws.Config{RequestTimeout: 300 * time.Millisecond},
		sendStore: &slowOnce{MessageStore: c.store, delay: 1500 * time.Millisecond}})
	b := c.node(t, "node-b", nodeOpts{})
	sender := dial(t, a, "sender", dialOpts{})
	sender.login(c, 1)
	sender.sub("grp1")
	local := dial(t, a, "local", dialOpts{})
	local.login(c, 2)
	local.sub("grp1")
	remote := dial(t, b, "remote", dialOpts{})
	remote.login(c, 3)
	remote.sub("grp1")

	r := sender.call("p1", `{"pub":{"id":"p1","topic":"grp1","client_msg_id":"late","content":"made it"}}`)
	if r.Code != 503 || r.Reason != ws.ReasonRetry {
		t.Fatalf("pub whose append outlived the request = %+v, want 503 retry", r)
	}
	for _, cl := range []*client{sender, local, remote} {
		cl.waitFor("the committed message", func(fs []serverFrame) bool { return countData(fs) >= 1 })
	}
	again := sender.call("p2", `{"pub":{"id":"p2","topic":"grp1","client_msg_id":"late","content":"made it"}}`)
	if again.Code != 202 || again.Params["duplicate"] != true || again.Params["seq"] != "1" {
		t.Fatalf("retry = %+v, want 202 duplicate of seq 1", again)
	}
	time.Sleep(300 * time.Millisecond) // a second delivery would have arrived by now
	for _, cl := range []*client{sender, local, remote} {
		got := cl.data()
		if len(got) != 1 || got[0].Seq != "1" || string(got[0].Content) != `"made it"` || got[0].MessageID != again.Params["message_id"] {
			t.Errorf("%s received %+v, want the message once", cl.name, got)
		}
	}
}

// TestContentNoStoreKeepsIsRefusedBeforeASeq sends content that MariaDB or PostgreSQL would
// refuse: each pub is answered 400 invalid with a stable reason, and no seq is taken and no
// claim written for it: the topic's counter does not move and the next message gets seq 2.
// (Raw invalid UTF-8 cannot come this way: the gateway closes a connection sending it, 1007.)
func TestContentNoStoreKeepsIsRefusedBeforeASeq(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	n := c.node(t, "node-a", nodeOpts{})
	cl := dial(t, n, "u1", dialOpts{})
	cl.login(c, 1)
	if r := cl.call("ok1", `{"pub":{"id":"ok1","topic":"grp4","client_msg_id":"ok1","content":"fine"}}`); r.Code != 202 {
		t.Fatalf("first pub = %+v", r)
	}
	keys, err := seq.New(c.rdb, seq.Config{KeyPrefix: c.prefix})
	if err != nil {
		t.Fatal(err)
	}
	grp4, _ := domain.ParseTopic("grp4")
	bad := []struct{ cmid, content, reason string }{
		{"deep", strings.Repeat("[", 40) + strings.Repeat("]", 40), domain.ReasonTooDeep},
		{"nul", `{"text":"a\u0000b"}`, domain.ReasonBadText},
		{"surrogate", `"\ud800"`, domain.ReasonBadText},
		{"huge", `[1e400]`, domain.ReasonBadNumber},
	}
	for _, b := range bad {
		id := "bad-" + b.cmid
		r := cl.call(id, fmt.Sprintf(`{"pub":{"id":"%s","topic":"grp4","client_msg_id":"%s","content":%s}}`, id, b.cmid, b.content))
		if r.Code != 400 || r.Reason != ws.ReasonInvalid || r.Params["field"] != "content" || r.Params["reason"] != b.reason {
			t.Errorf("pub of %s content = %+v, want 400 invalid content/%s", b.cmid, r, b.reason)
		}
		cmid, _ := domain.NewClientMsgID(b.cmid)
		if n := c.rdb.Exists(testCtx(t), keys.ClaimKey(seq.Key{Tenant: acme, Topic: grp4, From: 1, ClientMsgID: cmid})).Val(); n != 0 {
			t.Errorf("a claim was written for the refused %s pub", b.cmid)
		}
	}
	if last, ok, err := keys.LastSeq(testCtx(t), acme, grp4); err != nil || !ok || last != 1 {
		t.Errorf("counter after the refused pubs = %d (exists %v, %v), want 1", last, ok, err)
	}
	if r := cl.call("ok2", `{"pub":{"id":"ok2","topic":"grp4","client_msg_id":"ok2","content":"fine"}}`); r.Code != 202 || r.Params["seq"] != "2" {
		t.Errorf("next pub = %+v, want seq 2", r)
	}
	if n := c.events(t); n != 2 {
		t.Errorf("%d events stored, want 2", n)
	}
}

// TestRecallAndEditAreDeliveredAtCommit recalls and edits messages through a node's message
// operations: every online member of the topic, on both nodes, gets an info frame for each,
// the edit with its version and its content byte for byte.
func TestRecallAndEditAreDeliveredAtCommit(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.node(t, "node-a", nodeOpts{})
	b := c.node(t, "node-b", nodeOpts{})
	author := dial(t, a, "author", dialOpts{})
	author.login(c, 1)
	author.sub("grp2")
	reader := dial(t, b, "reader", dialOpts{})
	reader.login(c, 2)
	reader.sub("grp2")
	for i := 1; i <= 2; i++ {
		if r := author.call(fmt.Sprint("p", i), fmt.Sprintf(`{"pub":{"id":"p%d","topic":"grp2","client_msg_id":"m%d","content":"v1"}}`, i, i)); r.Code != 202 {
			t.Fatalf("pub %d = %+v", i, r)
		}
	}
	reader.waitFor("both messages", func(fs []serverFrame) bool { return countData(fs) == 2 })
	grp2, _ := domain.ParseTopic("grp2")
	ctx := testCtx(t)
	rec, err := a.ops.Recall(ctx, message.MessageRef{Tenant: acme, Topic: grp2, Seq: 1, Actor: 1})
	if err != nil {
		t.Fatal(err)
	}
	const edited = `{"text": "v2 <b>bold</b>",  "n" : 2}`
	content, err := domain.NewContent([]byte(edited), 0)
	if err != nil {
		t.Fatal(err)
	}
	ed, err := b.ops.Edit(ctx, message.EditMessage{MessageRef: message.MessageRef{Tenant: acme, Topic: grp2, Seq: 2, Actor: 1},
		Version: 1, Content: content})
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range []*client{author, reader} {
		fs := cl.waitFor("the recall and the edit", func(fs []serverFrame) bool {
			return hasInfo(fs, message.ChangeRecall, "1", "1") && hasInfo(fs, message.ChangeEdit, "1", "2")
		})
		for _, f := range fs {
			switch {
			case f.Info == nil:
			case f.Info.What == message.ChangeRecall && (f.Info.MessageID != rec.MessageID || f.Info.Content != nil || f.Info.Version != ""):
				t.Errorf("%s: recall frame = %+v", cl.name, f.Info)
			case f.Info.What == message.ChangeEdit && (f.Info.MessageID != ed.MessageID || f.Info.Version != "2" || string(f.Info.Content) != edited):
				t.Errorf("%s: edit frame = %+v (content %s), want version 2 and the content byte for byte", cl.name, f.Info, f.Info.Content)
			}
		}
	}
}
