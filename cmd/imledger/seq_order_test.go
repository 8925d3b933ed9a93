package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/pflag"

	"github.com/imledger/imledger/cmd/imledger/config"
	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// holdingSendStore holds the first append of a conversation seq of topic after it is armed, as a
// node that allocated the seq but is slow to commit it (a pause, a slow network), until released
// or the send's own deadline passes.
type holdingSendStore struct {
	message.MessageStore
	topic   atomic.Value // string
	armed   atomic.Bool
	held    chan int64
	release chan struct{}
}

func (s *holdingSendStore) AppendBatch(ctx context.Context, events []domain.Envelope) ([]eventstore.AppendResult, error) {
	if s.armed.Load() {
		for _, e := range events {
			if e.StreamID == s.topic.Load() && domain.IsConversationSeqEvent(e.EventType) && s.armed.CompareAndSwap(true, false) {
				s.held <- e.StreamVersion
				select {
				case <-s.release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				break
			}
		}
	}
	return s.MessageStore.AppendBatch(ctx, events)
}

// arm makes the next append of topic wait for a release.
func (s *holdingSendStore) arm(topic string) {
	s.topic.Store(topic)
	s.release = make(chan struct{})
	s.armed.Store(true)
}

// startNodeWith runs a node of env in-process like serve, with wrap around its send handler's
// store, and waits until it is ready.
func (e *serveEnv) startNodeWith(t *testing.T, nodeID string, wrap func(message.MessageStore) message.MessageStore) *served {
	t.Helper()
	addr := freeAddr(t)
	s := &served{base: "http://" + addr, file: e.config(t, nodeID, addr), stdout: &syncBuffer{}}
	fs := pflag.NewFlagSet(nodeID, pflag.ContinueOnError)
	config.RegisterFlags(fs)
	if err := fs.Parse([]string{"--config", s.file}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Sources{Flags: fs})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log, err := newLogger(logs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := newNode(cfg, log)
	n.wrapSendStore = wrap
	if err := n.start(ctx); err != nil {
		t.Fatalf("%s: start: %v\n%s", nodeID, err, logs.String())
	}
	s.stop = n.shutdown
	t.Cleanup(func() {
		_ = n.shutdown()
		if t.Failed() {
			t.Logf("%s logs:\n%s", nodeID, logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if code, _ := get(t, s.base+"/readyz"); code == http.StatusOK {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not ready after 60s\n%s", nodeID, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// catchingUp is a client that catches up with history after pos the way the protocol asks: it keeps
// every message served, moves to the last message of a page when there is more, and to last_seq
// when there is not (every seq up to it is a message or a final hole). page asks one page.
type catchingUp struct {
	pos  int64
	seen map[int64]bool
	page func(after int64) (seqs []int64, lastSeq int64, more bool)
}

// run asks pages until the client has caught up with what is served now, and returns last_seq.
func (c *catchingUp) run(t *testing.T) int64 {
	t.Helper()
	for range 100 {
		seqs, last, more := c.page(c.pos)
		for _, s := range seqs {
			if last > 0 && s > last {
				t.Fatalf("a page served seq %d above its last_seq %d", s, last)
			}
			c.seen[s] = true
		}
		if more && len(seqs) > 0 {
			c.pos = seqs[len(seqs)-1]
			continue
		}
		c.pos = max(c.pos, last)
		return last
	}
	t.Fatal("history never said it had no more")
	return 0
}

// Two nodes take seqs N and N+1 of one topic; N+1 commits, is relayed and projected first while
// node A still holds N. A client catching up with get (WebSocket) and with REST history in that
// window is told last_seq below N and never served N+1, so when N commits it is served N and N+1:
// it ends with every seq the log has. When node A instead holds its seq past the relay's gap
// deadline, the relay gives the seq up with a marker, last_seq moves past it, and node A's late
// send loses the seq to the marker and is committed under a new seq, which the client gets too.
func TestCatchUpAcrossSeqsCommittedOutOfOrder(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, testenv.Kafka(t), true)
	env.relay = "{min_poll: 1ms, max_poll: 20ms, gap_deadline: 2s}"
	// Node A holds a send past the gap deadline; the send itself must not time out meanwhile.
	env.extra = "send: {batch_timeout: 60s}"
	hs := &holdingSendStore{held: make(chan int64, 1)}
	a := env.startNodeWith(t, "node-a", func(s message.MessageStore) message.MessageStore {
		hs.MessageStore = s
		return hs
	})
	b := env.startNodeWith(t, "node-b", nil)

	alice := signUp(t, a.base, "alice")
	bob := signUp(t, b.base, "bob")
	carol := signUp(t, b.base, "carol")
	gid := createGroup(t, a.base, alice, "order")
	joinGroup(t, b.base, bob, gid)
	joinGroup(t, b.base, carol, gid)
	topic := "grp" + gid
	wc := dialWS(t, b.base, carol, "carol@b")

	ws := &catchingUp{seen: map[int64]bool{}}
	id := 0
	ws.page = func(after int64) ([]int64, int64, bool) {
		id++
		data, ctrl := wc.history("g"+strconv.Itoa(id), topic, after, 3)
		if ctrl.Code != 200 {
			t.Fatalf("get: %+v", ctrl)
		}
		var seqs []int64
		for _, d := range data {
			seqs = append(seqs, d.seq())
		}
		last, _ := strconv.ParseInt(fmt.Sprint(ctrl.Params["last_seq"]), 10, 64)
		more, _ := ctrl.Params["has_more"].(bool)
		return seqs, last, more
	}
	rest := &catchingUp{seen: map[int64]bool{}}
	rest.page = func(after int64) ([]int64, int64, bool) {
		r := call(t, http.MethodGet, fmt.Sprintf("%s/v1/im/topics/%s/messages?after_seq=%d&limit=3", a.base, topic, after), carol.token, "", "")
		if r.status != http.StatusOK {
			t.Fatalf("REST history: %d %s", r.status, r.raw)
		}
		var seqs []int64
		msgs, _ := r.Data["messages"].([]any)
		for _, m := range msgs {
			s, _ := strconv.ParseInt(m.(map[string]any)["seq"].(string), 10, 64)
			seqs = append(seqs, s)
		}
		last, _ := strconv.ParseInt(r.Data["last_seq"].(string), 10, 64)
		more, _ := r.Data["has_more"].(bool)
		return seqs, last, more
	}
	send := func(base string, u user, cmid string) int64 {
		t.Helper()
		r := sendREST(t, base, u, topic, cmid, `"hi"`)
		seq, _ := strconv.ParseInt(fmt.Sprint(r.Data["seq"]), 10, 64)
		if r.status != http.StatusCreated || seq == 0 {
			t.Errorf("send %s: %d %s", cmid, r.status, r.raw)
		}
		return seq
	}
	// projected waits until both clients are served seq as final.
	projected := func(seq int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for ws.run(t) < seq || rest.run(t) < seq {
			if time.Now().After(deadline) {
				t.Fatalf("seq %d not served as final within 30s (ws at %d, rest at %d)", seq, ws.pos, rest.pos)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	first := send(a.base, alice, "m1")
	send(b.base, bob, "m2")
	projected(first + 1)

	// Out of order: node A holds N, node B commits N+1. The window must close before the relay's
	// gap deadline gives N up; when projecting N+1 took longer than that (a loaded machine), the
	// window is tried again with the next seqs.
	aliceDone := make(chan int64, 1)
	for try := 1; ; try++ {
		hs.arm(topic)
		go func() { aliceDone <- send(a.base, alice, fmt.Sprintf("m3-%d", try)) }()
		n := <-hs.held
		start := time.Now()
		if got := send(b.base, bob, fmt.Sprintf("m4-%d", try)); got != n+1 {
			t.Fatalf("bob's seq %d, want %d after node A's held %d", got, n+1, n)
		}
		waitRow(t, env, topic, n+1)
		time.Sleep(300 * time.Millisecond) // the Redis projector too
		clients := map[string]*catchingUp{"ws": ws, "rest": rest}
		served := map[string]int64{}
		for name, c := range clients {
			served[name] = c.run(t) // fails on a seq served above its last_seq
		}
		overran := eventTypeAt(t, env, topic, n) == string(domain.EventGroupSeqSkipped)
		for name, c := range clients {
			if !overran && (served[name] >= n || c.seen[n+1]) {
				t.Fatalf("%s: in the window, last_seq %d and seq %d served while seq %d is not committed", name, served[name], n+1, n)
			}
		}
		close(hs.release)
		got := <-aliceDone
		if !overran {
			if got != n {
				t.Fatalf("alice's held send got seq %d, want %d", got, n)
			}
			projected(n + 1)
			break
		}
		t.Logf("try %d: the window (%s) outlived the gap deadline, seq %d was given up; again", try, time.Since(start).Round(time.Millisecond), n)
		if try == 3 {
			t.Fatal("three windows in a row outlived the relay's gap deadline")
		}
		projected(got)
	}

	// Node A holds its seq past the gap deadline: the relay gives it up.
	hs.arm(topic)
	go func() { aliceDone <- send(a.base, alice, "m5") }()
	m := <-hs.held
	if got := send(b.base, bob, "m6"); got != m+1 {
		t.Fatalf("bob's seq %d, want %d", got, m+1)
	}
	projected(m + 1) // only once seq m is final: a marker
	if typ := eventTypeAt(t, env, topic, m); typ != string(domain.EventGroupSeqSkipped) {
		t.Fatalf("seq %d holds %q, want a seq-skip marker", m, typ)
	}
	close(hs.release)
	late := <-aliceDone
	if late <= m+1 {
		t.Fatalf("alice's late send got seq %d, want a new seq above %d", late, m+1)
	}
	projected(late)

	logSeqs := messageSeqs(t, env, topic)
	for name, c := range map[string]*catchingUp{"ws": ws, "rest": rest} {
		for _, s := range logSeqs {
			if !c.seen[s] {
				t.Errorf("%s: the client never got seq %d, which the log has (log %v)", name, s, logSeqs)
			}
		}
		if c.seen[m] {
			t.Errorf("%s: served the given-up seq %d as a message", name, m)
		}
	}
}

// waitRow waits until the MySQL read model of the demo tenant holds seq of topic.
func waitRow(t *testing.T, env *serveEnv, topic string, seq int64) {
	t.Helper()
	db, err := sql.Open("mysql", testenv.MySQLDSN+env.template+"_demo")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := db.QueryRow("SELECT COUNT(*) FROM im_group_messages WHERE topic = ? AND seqid = ?", topic, seq).Scan(&n)
		if err == nil && n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("seq %d of %s not in MySQL within 30s (%v)", seq, topic, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventTypeAt returns the event type the event store holds at seq of topic, "" when none.
func eventTypeAt(t *testing.T, env *serveEnv, topic string, seq int64) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), env.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var typ string
	err = conn.QueryRow(t.Context(), "SELECT event_type FROM events WHERE tenant_id = 'demo' AND stream_id = $1 AND stream_version = $2",
		topic, seq).Scan(&typ)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return typ
}

// messageSeqs returns the seqs of topic that hold a message in the event store.
func messageSeqs(t *testing.T, env *serveEnv, topic string) []int64 {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), env.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), "SELECT stream_version FROM events WHERE tenant_id = 'demo' AND stream_id = $1 AND event_type = $2 ORDER BY 1",
		topic, string(domain.EventGroupMessageSent))
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return seqs
}

// pgConn connects to the deployment's event store database; it is closed at cleanup.
func pgConn(t *testing.T, env *serveEnv) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), env.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}
