package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/account/passhash"
	"github.com/imledger/imledger/commands/admin"
	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/admintrust"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

const (
	commandTopic = "im.admin.command"
	resultTopic  = "im.admin.command.result"
	deadTopic    = "im.dead.letter"
)

// env is one admin consumer over the real stores and an embedded Kafka broker.
type env struct {
	t        *testing.T
	pool     *pgxpool.Pool
	store    *eventstore.Store
	registry *tenant.Registry
	cache    *tenant.Cache
	guard    *account.Guard
	accounts *account.Service
	groups   *group.Handlers
	loader   *group.Loader
	sent     *broadcasts
	producer sarama.SyncProducer
	results  *collector
	dead     *collector
	template string
	brokers  []string
	consumer *admin.Consumer
	failures *admin.Failures
	handlers admin.Handlers
	stops    map[*admin.Consumer]func()

	// Trust: every consumer verifies with keys (a platform key, platform, and those of
	// envOpts.keys) and opens secrets with openKeys; it accepts unsigned commands and plain
	// secrets unless envOpts.signed (the real-broker mode).
	signed   bool
	platform *admintrust.Signer
	keys     []admintrust.ProducerKey
	openKeys []admintrust.OpenKey
	sealKey  admintrust.SealKey
	logs     *logBuffer // what every consumer logged
}

// logBuffer collects log lines; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newKey generates a producer key of alg and returns its signer and its key as a node holds it.
func newKey(t testing.TB, alg admintrust.Algorithm, id, scope string, who domain.Actor) (*admintrust.Signer, admintrust.ProducerKey) {
	t.Helper()
	g, err := admintrust.GenerateProducerKey(alg, id, scope, who)
	if err != nil {
		t.Fatal(err)
	}
	s, err := admintrust.ParseSigner(g.Signer)
	if err != nil {
		t.Fatal(err)
	}
	k, err := admintrust.ParseProducerKey(g.Producer)
	if err != nil {
		t.Fatal(err)
	}
	return s, k
}

// ops is the identity of the test environment's platform key.
var ops = domain.Actor{Type: domain.ActorAdmin, ID: "ops-7"}

// broadcasts records tenant broadcasts and tenant changes, standing in for the fanout. With
// hold set, a tenant broadcast signals entered and waits until hold is closed.
type broadcasts struct {
	mu      sync.Mutex
	tenants []domain.TenantID
	changes []tenant.Info
	hold    chan struct{}
	entered chan struct{}
}

func (b *broadcasts) BroadcastTenant(_ context.Context, t domain.TenantID, _ json.RawMessage, _ time.Time) error {
	b.mu.Lock()
	hold, entered := b.hold, b.entered
	b.mu.Unlock()
	if hold != nil {
		entered <- struct{}{}
		<-hold
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tenants = append(b.tenants, t)
	return nil
}

func (b *broadcasts) TenantChanged(_ context.Context, i tenant.Info) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.changes = append(b.changes, i)
}

type envOpts struct {
	mysqlDSN string        // default: the shared server
	config   *admin.Config // default: quick retries
	// signed refuses unsigned commands and plain secrets, as with real Kafka brokers.
	signed bool
	// keys are producer keys the consumers verify with besides the platform key.
	keys []admintrust.ProducerKey
}

func saramaConfig() *sarama.Config {
	sc := sarama.NewConfig()
	sc.Version = sarama.V2_8_0_0
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Producer.Return.Successes = true
	sc.Producer.Partitioner = sarama.NewMurmur2Partitioner
	sc.Consumer.Return.Errors = true
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	return sc
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	e := &env{t: t, sent: &broadcasts{}, signed: o.signed, logs: &logBuffer{}}
	var platform admintrust.ProducerKey
	e.platform, platform = newKey(t, admintrust.AlgEd25519, "platform-1", admintrust.PlatformScope, ops)
	e.keys = append([]admintrust.ProducerKey{platform}, o.keys...)
	open, err := admintrust.GenerateOpenKey("cs-1")
	if err != nil {
		t.Fatal(err)
	}
	e.openKeys, e.sealKey = []admintrust.OpenKey{open}, open.SealKey()
	e.pool, e.store = storetest.EventStore(t, 16)
	rdb, prefix := testenv.Redis(t)
	if o.mysqlDSN == "" {
		o.mysqlDSN = testenv.MySQLServer(t)
	}
	e.template = testenv.UniqueName("imadm")
	testenv.DropMySQLDatabasesAtCleanup(t, e.template+"_")
	router, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: o.mysqlDSN, DatabaseTemplate: e.template + "_{tenant}"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = router.Close() })
	if e.registry, err = tenant.New(tenant.Deps{Pool: e.pool, Store: e.store, Databases: router, Notifier: e.sent}); err != nil {
		t.Fatal(err)
	}
	if e.cache, err = tenant.NewCache(e.registry, tenant.CacheConfig{MissTTL: time.Nanosecond}, nil); err != nil {
		t.Fatal(err)
	}
	e.guard, _ = account.NewGuard(e.pool, account.GuardConfig{}, nil)
	cheap := account.Config{Password: passhash.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}}
	if e.accounts, err = account.New(account.Deps{Pool: e.pool, Store: e.store}, cheap); err != nil {
		t.Fatal(err)
	}
	gov, err := account.NewGovernance(account.GovernanceDeps{Pool: e.pool, Store: e.store, Accounts: e.accounts, Guard: e.guard})
	if err != nil {
		t.Fatal(err)
	}
	if e.loader, err = group.NewLoader(e.store, group.LoaderConfig{}); err != nil {
		t.Fatal(err)
	}
	if e.groups, err = group.New(group.Deps{Store: e.store, Loader: e.loader}, group.Config{}); err != nil {
		t.Fatal(err)
	}
	ops, err := message.NewMessageOpsHandler(message.MessageOpsDeps{Store: e.store}, message.MessageOpsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	send, err := message.NewSendMessageHandler(message.SendMessageDeps{Store: e.store, Redis: rdb},
		message.SendMessageConfig{Partitions: 2, Seq: seq.Config{KeyPrefix: prefix}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = send.Close() })

	e.brokers = testenv.Kafka(t)
	if e.producer, err = sarama.NewSyncProducer(e.brokers, saramaConfig()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.producer.Close() })
	for _, topic := range []string{commandTopic, resultTopic, deadTopic} {
		e.produce(topic, "init", []byte(`{}`)) // creates the topic before anyone subscribes
	}
	e.results, e.dead = e.collect(resultTopic), e.collect(deadTopic)
	e.failures = admin.NewFailures(e.pool, publisher{e.producer}, commandTopic, nil)
	e.handlers = admin.Handlers{Tenants: e.registry, Lookup: e.cache, Accounts: gov, Groups: e.groups, GroupStates: e.loader,
		Messages: ops, Sender: send, Broadcaster: e.sent, Events: e.store}
	cfg := admin.Config{Retry: admin.RetryConfig{MaxRetries: 3, InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond}}
	if o.config != nil {
		cfg = *o.config
	}
	e.consumer = e.startConsumer("test", cfg)
	return e
}

// startConsumer starts a consumer of the "admin-test" group named owner with cfg (its group and
// topics set here, and the environment's keys and trust mode unless cfg names keys). It stops
// when the test ends, or earlier by e.stop.
func (e *env) startConsumer(owner string, cfg admin.Config) *admin.Consumer {
	t := e.t
	t.Helper()
	group, err := sarama.NewConsumerGroup(e.brokers, "admin-test", saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConsumerGroup, cfg.ResultTopic, cfg.DeadLetterTopic = "admin-test", resultTopic, deadTopic
	if cfg.ProducerKeys == nil {
		cfg.ProducerKeys = e.keys
	}
	if cfg.SecretKeys == nil {
		cfg.SecretKeys = e.openKeys
	}
	cfg.AllowUnsigned = !e.signed
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := admin.New(cfg, admin.Deps{Pool: e.pool, Group: group, CommandTopic: commandTopic, Publisher: publisher{e.producer},
		Owner: owner, Handlers: e.handlers, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(testenv.Context(t)))
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	var once sync.Once
	wait := func() {
		once.Do(func() {
			stop()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("consumer %s: %v", owner, err)
				}
			case <-time.After(40 * time.Second):
				t.Errorf("consumer %s did not stop", owner)
			}
		})
	}
	if e.stops == nil {
		e.stops = map[*admin.Consumer]func(){}
	}
	e.stops[c] = wait
	t.Cleanup(wait)
	return c
}

// stop stops consumer c and waits until it ended.
func (e *env) stop(c *admin.Consumer) { e.stops[c]() }

// publisher is the consumer's Publisher over a sarama producer.
type publisher struct{ p sarama.SyncProducer }

func (p publisher) Publish(_ context.Context, topic, key string, value []byte, headers map[string]string) error {
	m := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(key), Value: sarama.ByteEncoder(value)}
	for k, v := range headers {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
	}
	_, _, err := p.p.SendMessage(m)
	return err
}

// PublishBatch makes publisher an admin.BatchPublisher, as the binary's is.
func (p publisher) PublishBatch(_ context.Context, msgs []admin.OutMessage) error {
	pm := make([]*sarama.ProducerMessage, len(msgs))
	for i, m := range msgs {
		pm[i] = &sarama.ProducerMessage{Topic: m.Topic, Key: sarama.StringEncoder(m.Key), Value: sarama.ByteEncoder(m.Value)}
		for k, v := range m.Headers {
			pm[i].Headers = append(pm[i].Headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
		}
	}
	if err := p.p.SendMessages(pm); err != nil {
		return admin.SaramaBatchError(pm, err)
	}
	return nil
}

func (e *env) produce(topic, key string, value []byte) {
	e.t.Helper()
	if _, _, err := e.producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(key),
		Value: sarama.ByteEncoder(value)}); err != nil {
		e.t.Fatal(err)
	}
}

// collector keeps every record of a topic.
type collector struct {
	mu   sync.Mutex
	recs []*sarama.ConsumerMessage
}

func (e *env) collect(topic string) *collector {
	e.t.Helper()
	c, err := sarama.NewConsumer(e.brokers, saramaConfig())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	parts, err := c.Partitions(topic)
	if err != nil {
		e.t.Fatal(err)
	}
	col := &collector{}
	for _, p := range parts {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(pc.AsyncClose)
		go func() {
			for m := range pc.Messages() {
				col.mu.Lock()
				col.recs = append(col.recs, m)
				col.mu.Unlock()
			}
		}()
	}
	return col
}

func (c *collector) snapshot() []*sarama.ConsumerMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*sarama.ConsumerMessage(nil), c.recs...)
}

// resultsOf returns the results answering command id so far.
func (e *env) resultsOf(id uuid.UUID) []domain.AdminResult {
	var out []domain.AdminResult
	for _, m := range e.results.snapshot() {
		var r domain.AdminResult
		if json.Unmarshal(m.Value, &r) == nil && r.CommandEventID == id.String() {
			out = append(out, r)
		}
	}
	return out
}

// await waits for the n-th result of command id.
func (e *env) await(id uuid.UUID, n int) domain.AdminResult {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if rs := e.resultsOf(id); len(rs) >= n {
			return rs[n-1]
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no result %d for command %s after 30s", n, id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// command builds a command envelope.
func command(tenantID string, typ domain.AdminCommandType, payload string) domain.AdminCommand {
	id, _ := uuid.NewV7()
	return domain.AdminCommand{EventID: id, TraceID: "trace-" + id.String()[:8], TenantID: tenantID,
		SourceService: "hotgo", TargetService: "imledger", EventType: string(typ), Version: 1,
		OccurredAt: time.Now().UTC(), Actor: domain.Actor{Type: domain.ActorAdmin, ID: "ops-7"}, Payload: json.RawMessage(payload)}
}

// send produces cmd, signed with the platform key in a signed environment, and waits for its
// first result.
func (e *env) send(cmd domain.AdminCommand) domain.AdminResult {
	e.t.Helper()
	if e.signed {
		return e.sendSigned(cmd, e.platform)
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		e.t.Fatal(err)
	}
	e.produce(commandTopic, cmd.TenantID+":"+cmd.EventType, body)
	return e.await(cmd.EventID, 1)
}

// sendSigned produces cmd signed by s, its secrets sealed to the node, and waits for its first
// result.
func (e *env) sendSigned(cmd domain.AdminCommand, s *admintrust.Signer) domain.AdminResult {
	e.t.Helper()
	e.produceSigned(cmd, s, time.Now())
	return e.await(cmd.EventID, 1)
}

// produceSigned produces cmd signed by s at time at, its secrets sealed to the node; it returns
// the record.
func (e *env) produceSigned(cmd domain.AdminCommand, s *admintrust.Signer, at time.Time) *sarama.ProducerMessage {
	e.t.Helper()
	var err error
	if cmd.Payload, err = admintrust.SealPayload(e.sealKey, cmd); err != nil {
		e.t.Fatal(err)
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		e.t.Fatal(err)
	}
	key := cmd.TenantID + ":" + cmd.EventType
	m := &sarama.ProducerMessage{Topic: commandTopic, Key: sarama.StringEncoder(key), Value: sarama.ByteEncoder(body)}
	for k, v := range s.Sign([]byte(key), body, at) {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
	}
	e.produceRecord(m)
	return m
}

// ok sends cmd and fails unless it succeeded; it returns the result data.
func (e *env) ok(cmd domain.AdminCommand) map[string]any {
	e.t.Helper()
	r := e.send(cmd)
	if r.Status != domain.AdminSucceeded {
		e.t.Fatalf("%s: %s %s %v", cmd.EventType, r.Status, r.Reason, r.Details)
	}
	var data map[string]any
	if len(r.Result) > 0 {
		if err := json.Unmarshal(r.Result, &data); err != nil {
			e.t.Fatal(err)
		}
	}
	return data
}

// rejected sends cmd and fails unless it was rejected with reason.
func (e *env) rejected(cmd domain.AdminCommand, reason string) domain.AdminResult {
	e.t.Helper()
	r := e.send(cmd)
	if r.Status != domain.AdminRejected || r.Reason != reason {
		e.t.Fatalf("%s: %s %q %v, want rejected %s", cmd.EventType, r.Status, r.Reason, r.Details, reason)
	}
	return r
}

// events counts the stored events of the tenant.
func (e *env) events(t domain.TenantID) int64 {
	e.t.Helper()
	n, err := e.store.Count(testenv.Context(e.t), eventstore.Filter{Tenant: t})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func newTenantID(t *testing.T) domain.TenantID {
	return domain.MustTenantID(strings.ReplaceAll(testenv.UniqueName("t"), "-", "_"))
}

// accountsOf makes users exist in tenant t, as a registration does (the user commands act only
// on a user of their tenant).
func (e *env) accountsOf(t domain.TenantID, users ...int64) {
	e.t.Helper()
	ids := make([]domain.UserID, len(users))
	for i, u := range users {
		ids[i] = domain.UserID(u)
	}
	storetest.RegisterUsers(e.t, e.store, t, ids...)
}
