package push_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/pushdb"
	"github.com/imledger/imledger/readmodels/tenantdb"
	"github.com/imledger/imledger/transport/presence"
	"github.com/imledger/imledger/transport/push"
)

// fixture is one test's tenant database, Redis prefix, embedded broker and push components.
type fixture struct {
	ctx      context.Context
	router   *tenantdb.Router
	tenant   domain.TenantID
	rdb      *redis.Client
	prefix   string
	brokers  []string
	topic    string
	pres     *presence.Store
	store    *pushdb.Store
	biz      *business.Store
	metrics  *push.Metrics
	producer *push.Producer
	deps     push.ProducerDeps // the producer's, for a variant
	cfg      push.Config
}

func setup(t *testing.T, cfg push.Config) *fixture {
	t.Helper()
	f := &fixture{ctx: testenv.Context(t)}
	testenv.MySQLServer(t)
	r, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	f.router = r
	f.tenant = domain.MustTenantID(testenv.UniqueName("push"))
	testenv.DropMySQLDatabasesAtCleanup(t, r.DatabaseName(f.tenant))
	if err := r.Provision(f.ctx, f.tenant); err != nil {
		t.Fatal(err)
	}
	f.rdb, f.prefix = testenv.Redis(t)
	f.brokers = testenv.Kafka(t)
	f.topic = "im.message.push"
	if f.pres, err = presence.New(presence.Deps{Redis: f.rdb}, presence.Config{KeyPrefix: f.prefix, NodeID: "n1"}); err != nil {
		t.Fatal(err)
	}
	f.store = pushdb.New(r)
	if f.biz, err = business.NewStore(r, f.rdb, business.Config{KeyPrefix: f.prefix, CacheTTL: time.Minute, RedisBackoff: time.Second}); err != nil {
		t.Fatal(err)
	}
	if f.metrics, err = push.NewMetrics(nil); err != nil {
		t.Fatal(err)
	}
	if err := kafka.EnsureTopic(f.ctx, kafka.Config{Brokers: f.brokers}, f.topic); err != nil {
		t.Fatal(err)
	}
	prod, err := kafka.NewSyncProducer(kafka.Config{Brokers: f.brokers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prod.Close() })
	cfg.KeyPrefix = f.prefix
	f.deps = push.ProducerDeps{Members: f.biz, Presence: f.pres, Mutes: f.store,
		Publisher: push.SaramaPublisher{Producer: prod, Topic: f.topic}, Redis: f.rdb, Metrics: f.metrics,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	f.cfg = cfg
	if f.producer, err = push.NewProducer(f.deps, cfg); err != nil {
		t.Fatal(err)
	}
	return f
}

// group writes a group with members 1..n into the tenant's read model, as the business
// projector would.
func (f *fixture) group(t *testing.T, gid int64, n int) domain.Topic {
	t.Helper()
	db, err := f.router.DB(f.ctx, f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := db.ExecContext(f.ctx, "INSERT INTO im_groups (group_id, topic, name, owner_id, member_count, status, version, created_at, updated_at)"+
		" VALUES (?, ?, 'g', 1, ?, 'normal', 1, ?, ?)", gid, "grp"+strconv.FormatInt(gid, 10), n, now, now); err != nil {
		t.Fatal(err)
	}
	for u := 1; u <= n; u++ {
		role := "member"
		if u == 1 {
			role = "owner"
		}
		if _, err := db.ExecContext(f.ctx, "INSERT INTO im_group_members (group_id, user_id, role, status, joined_at, version, updated_at)"+
			" VALUES (?, ?, ?, 'member', ?, 1, ?)", gid, u, role, now, now); err != nil {
			t.Fatal(err)
		}
	}
	topic, err := domain.GroupTopic(gid)
	if err != nil {
		t.Fatal(err)
	}
	return topic
}

// online logs users in on this node.
func (f *fixture) online(t *testing.T, users ...domain.UserID) {
	t.Helper()
	for _, u := range users {
		if _, err := f.pres.Login(f.ctx, presence.LoginInfo{Tenant: f.tenant, User: u, SessionID: "s" + u.String()}); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) message(topic domain.Topic, from domain.UserID, seq int64, mentions ...domain.UserID) message.CommittedMessage {
	return message.CommittedMessage{Tenant: f.tenant, Topic: topic, From: from, Seq: seq, MsgType: domain.MsgType("text"),
		Head: domain.Head{Mentions: mentions}, SentAt: time.Now().UTC()}
}

// tasks reads every task record on the topic until want are read or the wait ends.
func (f *fixture) tasks(t *testing.T, want int) []push.Task {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.ConsumeTopics(f.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []push.Task
	ctx, cancel := context.WithTimeout(f.ctx, 5*time.Second)
	defer cancel()
	for len(out) < want+1 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			task, err := push.ParseTask(r.Value)
			if err != nil {
				t.Errorf("record %s: %v", r.Value, err)
				return
			}
			if string(r.Key) != task.Key() {
				t.Errorf("record key %q, want %q", r.Key, task.Key())
			}
			out = append(out, task)
		})
		if len(out) >= want {
			// one more short poll proves nothing extra is there
			c2, cancel2 := context.WithTimeout(f.ctx, 500*time.Millisecond)
			cl.PollFetches(c2).EachRecord(func(r *kgo.Record) {
				task, _ := push.ParseTask(r.Value)
				out = append(out, task)
			})
			cancel2()
			break
		}
	}
	return out
}

// startWorker starts a worker over the fixture's topic with the given providers; stop ends it
// (as a shutdown or a rebalance would), and the test's end does if it was not called.
func (f *fixture) startWorker(t *testing.T, cfg push.Config, providers map[string]push.Provider) (stop func()) {
	t.Helper()
	sc, err := kafka.NewSaramaConfig(kafka.Config{Brokers: f.brokers})
	if err != nil {
		t.Fatal(err)
	}
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	g, err := sarama.NewConsumerGroup(f.brokers, "push-test", sc)
	if err != nil {
		t.Fatal(err)
	}
	cfg.KeyPrefix = f.prefix
	w, err := push.NewWorker(push.WorkerDeps{Group: g, Topic: f.topic, Redis: f.rdb, Store: f.store, Providers: providers,
		Metrics: f.metrics}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(f.ctx))
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// devices registers one webhook device per user.
func (f *fixture) devices(t *testing.T, provider string, users ...domain.UserID) {
	t.Helper()
	for _, u := range users {
		f.putDevice(t, f.tenant, pushdb.Device{UserID: u, DeviceID: "d" + u.String(), Provider: provider,
			Token: "tok-" + u.String(), Platform: "android"})
	}
}

// putDevice registers d in tenant's read model as the push-settings projection does, from a
// push.device_registered.v1 event.
func (f *fixture) putDevice(t *testing.T, tenant domain.TenantID, d pushdb.Device) {
	t.Helper()
	f.applyPush(t, tenant, domain.PushDeviceStreamID(d.UserID, d.DeviceID), domain.EventPushDeviceRegistered, d.UserID,
		domain.PushDeviceRegistered{User: d.UserID, DeviceID: d.DeviceID, Provider: d.Provider, Token: d.Token, Platform: d.Platform,
			RegisteredAt: time.Now()})
}

// mute mutes topic for u as the push-settings projection does, from a push.conversation_muted.v1
// event.
func (f *fixture) mute(t *testing.T, topic domain.Topic, u domain.UserID) {
	t.Helper()
	f.applyPush(t, f.tenant, domain.PushMuteStreamID(u, topic), domain.EventPushConversationMuted, u,
		domain.PushConversationMuted{User: u, Topic: topic.String(), MutedAt: time.Now()})
}

func (f *fixture) applyPush(t *testing.T, tenant domain.TenantID, stream string, typ domain.EventType, u domain.UserID, payload any) {
	t.Helper()
	env, err := domain.NewEnvelope(tenant, stream, 1, typ, domain.Actor{Type: domain.ActorUser, ID: u.String()}, payload)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.ApplyBatch(f.ctx, tenant, pushdb.DefaultTables(), []domain.Envelope{env}); err != nil {
		t.Fatal(err)
	}
}

// webhookServer is a real HTTP server that records the bodies it is posted and answers with
// the status fail gives for the n-th call (1-based).
type webhookServer struct {
	*httptest.Server
	mu    sync.Mutex
	calls []push.WebhookBody
	n     int
}

func newWebhookServer(t *testing.T, status func(n int) int) *webhookServer {
	s := &webhookServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b push.WebhookBody
		if err := decodeJSON(r, &b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.n++
		n := s.n
		code := http.StatusOK
		if status != nil {
			code = status(n)
		}
		if code == http.StatusOK {
			s.calls = append(s.calls, b)
		}
		s.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *webhookServer) accepted() []push.WebhookBody {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]push.WebhookBody(nil), s.calls...)
}

func (s *webhookServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func users(from, to int) []domain.UserID {
	var out []domain.UserID
	for u := from; u <= to; u++ {
		out = append(out, domain.UserID(u))
	}
	return out
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func pushLogin(f *fixture, u domain.UserID) presence.LoginInfo {
	return presence.LoginInfo{Tenant: f.tenant, User: u, SessionID: "again" + u.String()}
}

// newWebhookServerFunc is a real HTTP server answering with status(n, request) for the n-th call.
func newWebhookServerFunc(t *testing.T, status func(n int, r *http.Request) int) *webhookServer {
	s := &webhookServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.n++
		code := status(s.n, r)
		s.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s
}

// testWriter sends log lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }
