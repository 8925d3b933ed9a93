package ws_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/presence"
	"github.com/imledger/imledger/transport/userchan"
	"github.com/imledger/imledger/transport/ws"
)

var acme = domain.MustTenantID("acme")

// testCtx returns a context that ends with the test or after two minutes.
func testCtx(t testing.TB) context.Context { return testenv.Context(t) }

// cluster is what nodes share: one event store, one Redis key prefix, one token key.
type cluster struct {
	pool   *pgxpool.Pool // the event store's
	store  *eventstore.Store
	rdb    *redis.Client
	prefix string
	tokens *auth.Signer
	send   *message.SendMessageHandler // delivers nothing: for senders that wrap it
	biz    *business.Store             // the business read model, for channel nodes (readModel)
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	c := &cluster{}
	c.pool, c.store = storetest.EventStore(t, 16)
	c.rdb, c.prefix = testenv.Redis(t)
	var err error
	if c.tokens, err = auth.NewSigner(auth.Config{Keys: []auth.Key{{ID: "k1", Secret: strings.Repeat("s", 32)}}}); err != nil {
		t.Fatal(err)
	}
	c.send = c.sendHandler(t, c.rdb, nil)
	return c
}

// sendHandler is a real send handler over the cluster's store and the given Redis that tells l
// (when not nil) about every message it commits.
func (c *cluster) sendHandler(t testing.TB, rdb redis.UniversalClient, l message.CommitListener) *message.SendMessageHandler {
	t.Helper()
	return c.sendHandlerOver(t, c.store, rdb, l)
}

// sendHandlerOver is sendHandler over another store.
func (c *cluster) sendHandlerOver(t testing.TB, store message.MessageStore, rdb redis.UniversalClient, l message.CommitListener) *message.SendMessageHandler {
	t.Helper()
	h, err := message.NewSendMessageHandler(message.SendMessageDeps{Store: store, Redis: rdb, Listener: l},
		message.SendMessageConfig{Seq: seq.Config{KeyPrefix: c.prefix}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// token issues a token for user of acme.
func (c *cluster) token(t testing.TB, user domain.UserID) string {
	t.Helper()
	tok, err := c.tokens.Issue(acme, user, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// events counts the stored message events (the registrations of logged-in users aside).
func (c *cluster) events(t testing.TB) int64 {
	t.Helper()
	var types []domain.EventType
	for _, info := range domain.EventTypes() {
		if info.Category == domain.CategoryGroupMessage || info.Category == domain.CategoryDirectMessage {
			types = append(types, info.Type)
		}
	}
	n, err := c.store.Count(testCtx(t), eventstore.Filter{EventTypes: types})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// storeHistory answers get from the event store's message stream: the real write-side data,
// standing in for the read models in these tests.
type storeHistory struct{ store *eventstore.Store }

func (h storeHistory) History(ctx context.Context, tenant domain.TenantID, topic domain.Topic, _ domain.UserID, q ws.HistoryQuery) (ws.HistoryPage, error) {
	events, err := h.store.ReadStream(ctx, tenant, topic.String(), q.AfterSeq, q.Limit+1)
	if err != nil {
		return ws.HistoryPage{}, domain.Retryable("read history", err)
	}
	last, err := h.store.LastVersion(ctx, tenant, topic.String())
	if err != nil {
		return ws.HistoryPage{}, domain.Retryable("read history", err)
	}
	page := ws.HistoryPage{LastSeq: last, HasMore: len(events) > q.Limit}
	for i, e := range events {
		if i == q.Limit || (q.BeforeSeq > 0 && e.StreamVersion >= q.BeforeSeq) {
			break
		}
		var p domain.MessageSent
		if err := e.Decode(&p); err != nil {
			return ws.HistoryPage{}, err
		}
		page.Messages = append(page.Messages, readmodels.Message{Topic: topic.String(), Seq: e.StreamVersion, From: p.From,
			MsgType: p.MsgType, Status: readmodels.StatusNormal, Content: p.Content, SentAt: p.SentAt})
	}
	return page, nil
}

// node is one gateway: its own presence store, hub, fanout, send and message-operation handlers
// (which deliver what they commit through the node's fanout) and HTTP server.
type node struct {
	id       string
	pres     *presence.Store
	fan      *fanout.Fanout
	send     *message.SendMessageHandler
	ops      *message.MessageOpsHandler
	gw       *ws.Gateway
	srv      *httptest.Server
	registry *prometheus.Registry
	channel  *userchan.Channel // with nodeOpts.channel
}

type nodeOpts struct {
	cfg         ws.Config
	presenceTTL time.Duration
	rdb         *redis.Client                  // presence and fanout; default: the cluster's
	sendRedis   *redis.Client                  // the node's own handler's sequencer; default: the cluster's
	sender      ws.MessageSender               // default: the node's own handler
	sendStore   message.MessageStore           // the node's own handler's store; default: the cluster's
	history     ws.HistoryReader               // default: storeHistory
	logger      *slog.Logger                   // default: discard
	sessions    ws.SessionRecorder             // optional
	policy      ws.Policy                      // default: ws.DefaultPolicy
	gate        ws.Gate                        // optional
	limiter     ws.RateLimiter                 // optional
	local       func(*ws.Hub) fanout.Deliverer // the fanout's Local in front of the hub; default: the hub
	channel     *userchan.Config               // serve the per-user channel with this config (needs c.readModel)
}

func (c *cluster) node(t testing.TB, id string, o nodeOpts) *node {
	t.Helper()
	rdb := o.rdb
	if rdb == nil {
		rdb = c.rdb
	}
	n := &node{id: id, registry: prometheus.NewRegistry()}
	var err error
	n.pres, err = presence.New(presence.Deps{Redis: rdb}, presence.Config{KeyPrefix: c.prefix, NodeID: id, TTL: o.presenceTTL})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	t.Cleanup(stopRun)
	go func() { _ = n.pres.Run(runCtx) }()
	hub := ws.NewHub()
	var local fanout.Deliverer = hub
	if o.local != nil {
		local = o.local(hub)
	}
	n.fan, err = fanout.New(fanout.Deps{Redis: rdb, Nodes: n.pres, Local: local}, fanout.Config{KeyPrefix: c.prefix, NodeID: id})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.fan.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.fan.Close() })
	var commits message.CommitListener = fanout.Commits{Publisher: n.fan}
	opsDeps := message.MessageOpsDeps{Store: c.store, Listener: fanout.Commits{Publisher: n.fan}}
	if o.channel != nil {
		n.channel = c.channelFor(t, n, *o.channel)
		commits = bothCommits{commits, n.channel}
		opsDeps.Reads = n.channel
	}
	var store message.MessageStore = c.store
	if o.sendStore != nil {
		store = o.sendStore
	}
	sendRedis := c.rdb
	if o.sendRedis != nil {
		sendRedis = o.sendRedis
	}
	n.send = c.sendHandlerOver(t, store, sendRedis, commits)
	if n.ops, err = message.NewMessageOpsHandler(opsDeps, message.MessageOpsConfig{}); err != nil {
		t.Fatal(err)
	}
	deps := ws.Deps{Tokens: c.tokens, Sender: n.send, Marks: n.ops, History: storeHistory{c.store},
		Presence: n.pres, Hub: hub, Publisher: n.fan, Logger: o.logger, Registerer: n.registry, Sessions: o.sessions,
		Policy: o.policy, Gate: o.gate, Limiter: o.limiter}
	if n.channel != nil {
		deps.Channel, deps.ChannelState = n.channel.Log(), c.biz
	}
	if o.sender != nil {
		deps.Sender = o.sender
	}
	if o.history != nil {
		deps.History = o.history
	}
	n.gw, err = ws.New(deps, o.cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(ws.Path, n.gw)
	n.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = n.gw.Shutdown(ctx)
		n.srv.Close()
	})
	return n
}

func (n *node) url() string { return "ws" + strings.TrimPrefix(n.srv.URL, "http") + ws.Path }

// counter reads a counter of the node's registry.
func (n *node) counter(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := n.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metric
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// Server frames as a client sees them.
type (
	ctrlFrame struct {
		ID     string         `json:"id"`
		Code   int            `json:"code"`
		Text   string         `json:"text"`
		Reason string         `json:"reason"`
		Params map[string]any `json:"params"`
		TS     string         `json:"ts"`
	}
	dataFrame struct {
		Topic     string          `json:"topic"`
		Seq       string          `json:"seq"`
		From      string          `json:"from"`
		MessageID string          `json:"message_id"`
		Version   string          `json:"version"`
		Head      json.RawMessage `json:"head"`
		TS        string          `json:"ts"`
		UpdatedAt string          `json:"updated_at"`
		Content   json.RawMessage `json:"content"`
	}
	presFrame struct{ Topic, What, Src string }
	// meFrame is an item of the per-user channel, or a conversation's channel frame.
	meFrame struct {
		Seq, Epoch, What, Topic, From, Src, Role, Change, Reason, Version string
		ReadSeq                                                           string          `json:"read_seq"`
		MsgSeq                                                            string          `json:"msg_seq"`
		MessageID                                                         string          `json:"message_id"`
		Message                                                           json.RawMessage `json:"message"`
		Content                                                           json.RawMessage `json:"content"`
		Head                                                              json.RawMessage `json:"head"`
		Raw                                                               json.RawMessage `json:"-"` // the item as sent
	}
	infoFrame struct {
		Topic, From, What, Seq, Src, Version string
		MessageID                            string          `json:"message_id"`
		Content                              json.RawMessage `json:"content"`
	}
	serverFrame struct {
		Ctrl *ctrlFrame `json:"ctrl"`
		Data *dataFrame `json:"data"`
		Pres *presFrame `json:"pres"`
		Info *infoFrame `json:"info"`
		Me   *meFrame   `json:"me"`
		at   time.Time
	}
)

// client is a test WebSocket client that records every frame it receives.
type client struct {
	t    testing.TB
	name string
	c    *websocket.Conn

	mu       sync.Mutex
	frames   []serverFrame
	closeErr error
	done     chan struct{}
}

type dialOpts struct {
	origin  string
	readBuf int  // SO_RCVBUF of the client socket; 0 leaves the default
	noRead  bool // never read the socket (a stuck client)
}

func dial(t testing.TB, n *node, name string, o dialOpts) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	opts := &websocket.DialOptions{HTTPHeader: http.Header{}}
	if o.origin != "" {
		opts.HTTPHeader.Set("Origin", o.origin)
	}
	if o.readBuf > 0 {
		// Set before connect, so the small window is what the handshake advertises.
		d := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, o.readBuf)
			})
			return errors.Join(err, serr)
		}}
		opts.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	c, _, err := websocket.Dial(ctx, n.url(), opts)
	if err != nil {
		t.Fatalf("%s: dial: %v", name, err)
	}
	c.SetReadLimit(1 << 20)
	cl := &client{t: t, name: name, c: c, done: make(chan struct{})}
	t.Cleanup(func() { _ = c.CloseNow() })
	if !o.noRead {
		go cl.readLoop()
	}
	return cl
}

func (cl *client) readLoop() {
	defer close(cl.done)
	for {
		_, b, err := cl.c.Read(context.Background())
		if err != nil {
			cl.mu.Lock()
			cl.closeErr = err
			cl.mu.Unlock()
			return
		}
		var f serverFrame
		if err := json.Unmarshal(b, &f); err != nil {
			cl.t.Errorf("%s: undecodable server frame %q: %v", cl.name, b, err)
			continue
		}
		if f.Me != nil {
			var raw struct {
				Me json.RawMessage `json:"me"`
			}
			_ = json.Unmarshal(b, &raw)
			f.Me.Raw = raw.Me
		}
		f.at = time.Now()
		cl.mu.Lock()
		cl.frames = append(cl.frames, f)
		cl.mu.Unlock()
	}
}

// write sends one frame, given as JSON text or a value to encode.
func (cl *client) write(v any) {
	cl.t.Helper()
	b, ok := v.(string)
	if !ok {
		raw, err := json.Marshal(v)
		if err != nil {
			cl.t.Fatal(err)
		}
		b = string(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.c.Write(ctx, websocket.MessageText, []byte(b)); err != nil {
		cl.t.Fatalf("%s: write: %v", cl.name, err)
	}
}

func (cl *client) snapshot() []serverFrame {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	out := make([]serverFrame, len(cl.frames))
	copy(out, cl.frames)
	return out
}

// waitFor polls cond over the received frames until it holds or 15 s pass.
func (cl *client) waitFor(what string, cond func([]serverFrame) bool) []serverFrame {
	cl.t.Helper()
	return cl.waitWithin(15*time.Second, what, cond)
}

// waitWithin is waitFor with another deadline.
func (cl *client) waitWithin(within time.Duration, what string, cond func([]serverFrame) bool) []serverFrame {
	cl.t.Helper()
	deadline := time.Now().Add(within)
	for {
		fs := cl.snapshot()
		if cond(fs) {
			return fs
		}
		if time.Now().After(deadline) {
			cl.t.Fatalf("%s: timed out waiting for %s; got %d frames", cl.name, what, len(fs))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ctrl waits for the ctrl answering frame id.
func (cl *client) ctrl(id string) ctrlFrame {
	cl.t.Helper()
	var got ctrlFrame
	cl.waitFor("ctrl "+id, func(fs []serverFrame) bool {
		for _, f := range fs {
			if f.Ctrl != nil && f.Ctrl.ID == id {
				got = *f.Ctrl
				return true
			}
		}
		return false
	})
	return got
}

// call writes a frame and waits for its ctrl.
func (cl *client) call(id string, v any) ctrlFrame {
	cl.t.Helper()
	cl.write(v)
	return cl.ctrl(id)
}

// login logs in as user, who is registered first (commands naming a user need it to exist), and
// fails the test on anything but 200.
func (cl *client) login(c *cluster, user domain.UserID) {
	cl.t.Helper()
	storetest.RegisterUsers(cl.t, c.store, acme, user)
	if r := cl.call("login", map[string]any{"login": map[string]any{"id": "login", "token": c.token(cl.t, user)}}); r.Code != 200 {
		cl.t.Fatalf("%s: login = %+v", cl.name, r)
	}
}

// sub subscribes and fails the test on anything but 200.
func (cl *client) sub(topic string) {
	cl.t.Helper()
	id := "sub-" + topic
	if r := cl.call(id, map[string]any{"sub": map[string]any{"id": id, "topic": topic}}); r.Code != 200 {
		cl.t.Fatalf("%s: sub %s = %+v", cl.name, topic, r)
	}
}

// data returns the data frames received so far.
func (cl *client) data() []dataFrame {
	var out []dataFrame
	for _, f := range cl.snapshot() {
		if f.Data != nil {
			out = append(out, *f.Data)
		}
	}
	return out
}

// closed waits until the server closed the connection and returns the close status.
func (cl *client) closed(within time.Duration) (websocket.StatusCode, string) {
	cl.t.Helper()
	select {
	case <-cl.done:
	case <-time.After(within):
		cl.t.Fatalf("%s: connection still open after %s", cl.name, within)
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var ce websocket.CloseError
	if errors.As(cl.closeErr, &ce) {
		return ce.Code, ce.Reason
	}
	return -1, fmt.Sprint(cl.closeErr)
}

// authSignerAt is a signer with the cluster's key whose clock reads at.
func authSignerAt(at time.Time) (*auth.Signer, error) {
	return auth.NewSigner(auth.Config{Keys: []auth.Key{{ID: "k1", Secret: strings.Repeat("s", 32)}}, Now: func() time.Time { return at }})
}

func userID(i int) domain.UserID { return domain.UserID(i) }
