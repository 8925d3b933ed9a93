package web_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver for migrations
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/account/passhash"
	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/policy"
	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/migrations"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/msgstore"
	"github.com/imledger/imledger/readmodels/query"
	"github.com/imledger/imledger/readmodels/tenantdb"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/presence"
	"github.com/imledger/imledger/transport/rest"
	"github.com/imledger/imledger/transport/userchan"
	"github.com/imledger/imledger/transport/web"
	"github.com/imledger/imledger/transport/ws"
)

// demo is the tenant the page logs in to.
var demo = domain.MustTenantID("demo")

// chatServer is one imledger node built from the packages as serve builds it: the event store,
// the send, group and account handlers, the outbox relay to Kafka, the projector feeding the
// MySQL read models, presence and fanout in Redis, the REST API, the WebSocket gateway and the
// page, on one HTTP listener. Every service is the real one, isolated for the test: a fresh
// PostgreSQL database, a Redis key prefix, a Kafka topic prefix on the embedded broker and a
// MySQL database for the demo tenant.
type chatServer struct {
	url  string
	gate *gate  // in front of the WebSocket gateway
	stop func() // stops the node's HTTP side (see restart)

	ctx    context.Context // ends at cleanup
	log    *slog.Logger
	pool   *pgxpool.Pool
	store  *eventstore.Store
	rdb    *redis.Client
	prefix string
	kafka  tkafka.Config

	msgs *msgstore.Store
	biz  *business.Store
}

func newChatServer(t *testing.T) *chatServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &chatServer{ctx: ctx, log: testLogger()}
	s.openStores(t)
	s.startPipeline(t)
	s.serve(t)
	return s
}

func testLogger() *slog.Logger {
	level := slog.LevelError
	if os.Getenv("IM_TEST_VERBOSE") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// openStores migrates a fresh event store, takes a Redis prefix and provisions the demo tenant's
// MySQL database under a name of this test's own.
func (s *chatServer) openStores(t *testing.T) {
	t.Helper()
	url := testenv.Postgres(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := migrations.UpPostgres(s.ctx, db); err != nil {
		t.Fatal(err)
	}
	if s.pool, err = pgxpool.New(s.ctx, url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.pool.Close)
	if s.store, err = eventstore.New(s.pool, eventstore.Config{}); err != nil {
		t.Fatal(err)
	}
	s.rdb, s.prefix = testenv.Redis(t)

	testenv.MySQLServer(t)
	router, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN,
		DatabaseTemplate: testenv.UniqueName("web") + "_" + tenantdb.TenantPlaceholder})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = router.Close() })
	testenv.DropMySQLDatabasesAtCleanup(t, router.DatabaseName(demo))
	if err := router.Provision(s.ctx, demo); err != nil {
		t.Fatal(err)
	}
	s.msgs = msgstore.NewStore(router)
	if s.biz, err = business.NewStore(router, s.rdb, business.Config{KeyPrefix: s.prefix + "biz:"}); err != nil {
		t.Fatal(err)
	}
}

// startPipeline runs the relay (event store to Kafka) and the projector (Kafka to the MySQL
// message and business read models) until the test ends.
func (s *chatServer) startPipeline(t *testing.T) {
	t.Helper()
	s.kafka = tkafka.Config{Brokers: testenv.Kafka(t), TopicPrefix: testenv.UniqueName("web") + ".", Partitions: 2}
	if err := tkafka.EnsureTopics(s.ctx, s.kafka); err != nil {
		t.Fatal(err)
	}
	rl, err := relay.New(s.store, s.pool, relay.Config{Kafka: s.kafka}, s.log, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := projections.EnsureSchema(s.ctx, s.pool); err != nil {
		t.Fatal(err)
	}
	biz := projections.Projection{Name: "business-mysql", ConsumerGroup: "web-test.business-mysql",
		Topics: []string{tkafka.TopicBusinessEvent},
		Accept: func(et domain.EventType) bool {
			info, ok := domain.LookupEventType(et)
			return ok && info.Category == domain.CategoryBusiness
		},
		Applier: projections.ApplierFunc(func(ctx context.Context, tenant domain.TenantID, evs []domain.Envelope) (int, error) {
			return s.biz.Apply(ctx, tenant, "web-test.business-mysql", business.DefaultTables(), evs)
		}),
	}
	proj, err := projections.NewProjector(projections.Config{Kafka: s.kafka, LagInterval: time.Second, CloseTimeout: 5 * time.Second},
		projections.Deps{Postgres: s.pool, Logger: s.log}, projections.MessagesMySQL(s.msgs, "web-test.messages-mysql"), biz)
	if err != nil {
		t.Fatal(err)
	}
	s.background(t, "relay", rl.Run, nil)
	s.background(t, "projector", proj.Run, nil)
}

// background runs f until the test ends and checks that it stopped without error.
func (s *chatServer) background(t *testing.T, name string, f func(context.Context) error, after func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("%s did not stop", name)
		}
		if after != nil {
			after()
		}
	})
}

// serve starts the node's HTTP side on a free port of the loopback interface.
func (s *chatServer) serve(t *testing.T) {
	t.Helper()
	s.listen(t, "127.0.0.1:0")
	t.Cleanup(func() {
		if s.stop != nil {
			s.stop()
		}
	})
}

// restart stops the node's HTTP side, the WebSocket gateway and everything that lives with a
// process (presence, fanout, the send handler), as a crash or a deploy would, and starts it again
// on the same address. The stores, the relay and the projector keep running: they stand for the
// databases and Kafka, which outlive the node.
func (s *chatServer) restart(t *testing.T, down time.Duration) {
	t.Helper()
	addr := strings.TrimPrefix(s.url, "http://")
	s.stop()
	s.stop = nil
	time.Sleep(down)
	s.listen(t, addr)
}

// listen builds the handlers, the REST API, the gateway and the page, and listens on addr.
func (s *chatServer) listen(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(s.ctx)
	var closers []func()
	fail := func(err error) {
		t.Helper()
		cancel()
		t.Fatal(err)
	}
	signer, err := auth.NewSigner(auth.Config{Keys: []auth.Key{{ID: "k1", Secret: strings.Repeat("web-test-", 4)}}})
	if err != nil {
		fail(err)
	}
	accounts, err := account.New(account.Deps{Pool: s.pool, Store: s.store, Logger: s.log},
		account.Config{Password: passhash.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}})
	if err != nil {
		fail(err)
	}
	sendPolicy, err := policy.New(policy.Deps{Store: s.store}, policy.Config{})
	if err != nil {
		fail(err)
	}
	idem, err := rest.NewPostgresIdempotency(s.pool, s.log)
	if err != nil {
		fail(err)
	}
	pres, err := presence.New(presence.Deps{Redis: s.rdb}, presence.Config{KeyPrefix: s.prefix + "pres:", NodeID: "web-test"})
	if err != nil {
		fail(err)
	}
	presDone := make(chan error, 1)
	go func() { presDone <- pres.Run(ctx) }()
	closers = append(closers, func() {
		if err := <-presDone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("presence: %v", err)
		}
	})
	hub := ws.NewHub()
	fan, err := fanout.New(fanout.Deps{Redis: s.rdb, Nodes: pres, Local: hub}, fanout.Config{KeyPrefix: s.prefix + "fan:", NodeID: "web-test"})
	if err != nil {
		fail(err)
	}
	if err := fan.Start(ctx); err != nil {
		fail(err)
	}
	closers = append(closers, func() { _ = fan.Close() })
	// Group and relation changes reach the sessions of their topic, as serve wires them.
	notifier, err := ws.NewNotifier(fan, s.log)
	if err != nil {
		fail(err)
	}
	// The users' channels (the page's conversation list), in presence's key space as serve keeps them.
	chLog, err := userchan.NewLog(s.rdb, pres.ChannelNodesKey, userchan.Config{KeyPrefix: s.prefix + "pres:"})
	if err != nil {
		fail(err)
	}
	channel, err := userchan.New(userchan.Deps{Log: chLog, Publisher: fan, Directory: s.biz, Logger: s.log})
	if err != nil {
		fail(err)
	}
	chDone := make(chan error, 1)
	go func() { chDone <- channel.Run(ctx) }()
	closers = append(closers, func() { <-chDone })
	groups, err := group.New(group.Deps{Store: s.store, Invalidator: sendPolicy, Notifier: notifier, Changes: channel}, group.Config{})
	if err != nil {
		fail(err)
	}
	send, err := message.NewSendMessageHandler(message.SendMessageDeps{Store: s.store, Redis: s.rdb, Policy: sendPolicy, Logger: s.log,
		Listener: commitsAndChannel{fanout.Commits{Publisher: fan}, channel}},
		message.SendMessageConfig{Seq: seq.Config{KeyPrefix: s.prefix}})
	if err != nil {
		fail(err)
	}
	closers = append(closers, func() { _ = send.Close() })
	ops, err := message.NewMessageOpsHandler(message.MessageOpsDeps{Store: s.store, Listener: fanout.Commits{Publisher: fan}, Reads: channel},
		message.MessageOpsConfig{})
	if err != nil {
		fail(err)
	}
	reader := query.NewReader(s.msgs, nil, s.log)
	readPolicy := rest.MemberReadPolicy{Members: s.biz}

	mux := http.NewServeMux()
	if _, err := rest.New(mux, rest.Config{Logger: s.log, RateLimitPrefix: s.prefix + "rl:",
		// A test signs up more users from one address than a person would.
		RegisterPerIP: 100, LoginPerIP: 200}, rest.Handlers{
		Send: send, MessageOps: ops, History: reader, Unread: reader, ReadPolicy: readPolicy, Presence: pres, PresencePolicy: sendPolicy,
		Groups: groups, Business: s.biz, Accounts: accounts, Tokens: signer, Idempotency: idem, Redis: s.rdb,
		Conversations: query.NewConversationReader(reader, s.biz), FriendRequests: s.biz,
	}); err != nil {
		fail(err)
	}
	gw, err := ws.New(ws.Deps{Tokens: signer, Sender: send, Marks: ops, History: wsHistory{reader}, Presence: pres,
		Hub: hub, Publisher: fan, Policy: ws.MemberPolicy{Read: readPolicy, Send: sendPolicy}, Logger: s.log,
		Channel: chLog, ChannelState: s.biz}, ws.Config{})
	if err != nil {
		fail(err)
	}
	if s.gate == nil {
		s.gate = newGate(gw)
	} else {
		s.gate.setNext(gw)
	}
	mux.Handle(ws.Path, s.gate)
	mux.Handle("/", web.Handler())

	var ln net.Listener
	for i := 0; ; i++ {
		// The old listener's port may take a moment to be free again after a restart.
		if ln, err = net.Listen("tcp", addr); err == nil || i == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		fail(err)
	}
	srv := httptest.NewUnstartedServer(s.gate.lists(mux))
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Config.ConnState = s.gate.connState
	srv.Start()
	s.url = srv.URL
	s.stop = func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = gw.Shutdown(sctx)
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
}

// wsHistory answers the gateway's history queries from the read models.
type wsHistory struct{ r *query.Reader }

func (h wsHistory) History(ctx context.Context, tenant domain.TenantID, topic domain.Topic, viewer domain.UserID, q ws.HistoryQuery) (ws.HistoryPage, error) {
	p, err := h.r.History(ctx, tenant, topic, viewer, query.HistoryQuery{AfterSeq: q.AfterSeq, BeforeSeq: q.BeforeSeq, Limit: q.Limit})
	if err != nil {
		return ws.HistoryPage{}, err
	}
	return ws.HistoryPage{Messages: p.Messages, LastSeq: p.LastSeq, HasMore: p.HasMore}, nil
}

// commitsAndChannel hands committed messages to the fanout and to the users' channels (a new
// 1:1 chat's item), as serve does.
type commitsAndChannel struct {
	fanout.Commits
	channel *userchan.Channel
}

// MessagesCommitted implements message.CommitListener.
func (c commitsAndChannel) MessagesCommitted(ctx context.Context, msgs []message.CommittedMessage) {
	c.Commits.MessagesCommitted(ctx, msgs)
	c.channel.MessagesCommitted(ctx, msgs)
}
