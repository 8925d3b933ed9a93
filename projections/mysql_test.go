package projections_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/msgstore"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// mysqlEnv is a set of tenant databases under a unique name prefix, dropped at cleanup.
type mysqlEnv struct {
	t      testing.TB
	prefix string
	router *tenantdb.Router
	store  *msgstore.Store
}

func newMySQL(t testing.TB) *mysqlEnv {
	t.Helper()
	testenv.MySQLServer(t)
	prefix := testenv.UniqueName("pj")
	testenv.DropMySQLDatabasesAtCleanup(t, prefix)
	m := &mysqlEnv{t: t, prefix: prefix}
	m.router = m.routerAt(testenv.MySQLDSN)
	m.store = msgstore.NewStore(m.router)
	return m
}

// routerAt opens another router over the same databases through serverDSN (e.g. a proxy).
func (m *mysqlEnv) routerAt(serverDSN string) *tenantdb.Router {
	r, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: serverDSN, DatabaseTemplate: m.prefix + "_" + tenantdb.TenantPlaceholder})
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() { _ = r.Close() })
	return r
}

func (m *mysqlEnv) tenant(name string) domain.TenantID {
	m.t.Helper()
	tn := domain.MustTenantID(name)
	if err := m.router.Provision(testCtx(m.t), tn); err != nil {
		m.t.Fatal(err)
	}
	return tn
}

func (m *mysqlEnv) counts(tn domain.TenantID) msgstore.TableCounts {
	m.t.Helper()
	c, err := m.store.Counts(testCtx(m.t), tn, msgstore.DefaultTables())
	if err != nil {
		m.t.Fatal(err)
	}
	return c
}

func (m *mysqlEnv) page(tn domain.TenantID, topic domain.Topic) []readmodels.Message {
	m.t.Helper()
	msgs, _, err := m.store.Page(testCtx(m.t), tn, msgstore.DefaultTables(), msgstore.PageQuery{Topic: topic, Limit: 1000})
	if err != nil {
		m.t.Fatal(err)
	}
	return msgs
}

func seqs(msgs []readmodels.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Seq
	}
	return out
}

// TestMySQLEveryEventDeliveredTwice republishes the whole batch: every event must give exactly
// one row, whatever the second delivery finds.
func TestMySQLEveryEventDeliveredTwice(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	m := newMySQL(t)
	tn := m.tenant("dup")
	p, _ := h.run(h.config(), projections.MessagesMySQL(m.store, ""))
	var events []domain.Envelope
	for seq := int64(1); seq <= 60; seq++ {
		for g := int64(1); g <= 10; g++ {
			events = append(events, sentEvent(tn, groupTopic(g), seq, domain.UserID(g), "hello"))
		}
	}
	h.publish(events...)
	h.publish(events...)
	want := msgstore.TableCounts{GroupMessages: int64(len(events)), ReadMarks: 10}
	eventually(t, 40*time.Second, func() error {
		if got := m.counts(tn); got != want {
			return fmt.Errorf("counts %+v, want %+v", got, want)
		}
		return nil
	})
	eventually(t, 20*time.Second, func() error {
		lags, err := p.Lag(testCtx(t))
		if err != nil || lags[0].Events != 0 {
			return fmt.Errorf("lag %+v, %v", lags, err)
		}
		return nil
	})
	if got := m.counts(tn); got != want {
		t.Errorf("after catching up: counts %+v, want %+v", got, want)
	}
	// A redelivery is applied again (and changes nothing), so the metric counts at least every
	// event once; a consumer-group rebalance under load may redeliver more than the second copy.
	if got := p.Metrics().Applied(projections.GroupMessagesMySQL); got < float64(len(events)) {
		t.Errorf("applied metric %v, want at least %d", got, len(events))
	}
	if batches, flushed := p.Metrics().Batches(projections.GroupMessagesMySQL); batches == 0 || flushed < float64(2*len(events)) || float64(batches) > flushed {
		t.Errorf("%d batches held %v events; want every one of the %d delivered events in one", batches, flushed, 2*len(events))
	}
}

// TestMySQLSendRecallEditEndInFinalState publishes send, recall and edit in order.
func TestMySQLSendRecallEditEndInFinalState(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	m := newMySQL(t)
	tn := m.tenant("sre")
	h.run(h.config(), projections.MessagesMySQL(m.store, ""))
	g := groupTopic(42)
	h.publish(
		sentEvent(tn, g, 1, 5, "first"),
		sentEvent(tn, g, 2, 6, "second"),
		sentEvent(tn, g, 3, 5, "third"),
		recallEvent(tn, g, 2, 6, 1),
		editEvent(tn, g, 3, 5, 2, "third, edited"),
		editEvent(tn, g, 3, 5, 3, "third, edited twice"),
	)
	eventually(t, 30*time.Second, func() error {
		msgs := m.page(tn, g)
		if len(msgs) != 3 || !msgs[1].Recalled() || msgs[2].Version != 3 {
			return fmt.Errorf("messages %+v", msgs)
		}
		return nil
	})
	msgs := m.page(tn, g)
	if string(msgs[0].Content) != `"first"` || msgs[0].Version != 1 {
		t.Errorf("seq 1 = %+v", msgs[0])
	}
	if msgs[1].Content != nil || msgs[1].RecalledBy != 6 {
		t.Errorf("seq 2 not recalled cleanly: %+v", msgs[1])
	}
	if string(msgs[2].Content) != `"third, edited twice"` {
		t.Errorf("seq 3 = %s", msgs[2].Content)
	}
}

// TestMySQLPoisonedEventWaitsWithItsConversation fails one event in the MySQL projection: the
// event goes to the dead letters, the same conversation's later events are not written, another
// conversation's are, and a replay catches the conversation up in order.
func TestMySQLPoisonedEventWaitsWithItsConversation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	m := newMySQL(t)
	tn := m.tenant("poison")
	a, b := groupTopic(1), groupTopic(2)
	poisoned := sentEvent(tn, a, 2, 9, "a2")
	var failing atomic.Bool
	failing.Store(true)
	proj := projections.MessagesMySQL(m.store, "")
	proj.Applier = projections.FailOn(proj.Applier, func(e domain.Envelope) error {
		if failing.Load() && e.EventID == poisoned.EventID {
			return errors.New("simulated constraint violation")
		}
		return nil
	})
	h.run(h.config(), proj)
	h.publish(sentEvent(tn, a, 1, 9, "a1"), sentEvent(tn, b, 1, 9, "b1"), poisoned, sentEvent(tn, b, 2, 9, "b2"),
		sentEvent(tn, a, 3, 9, "a3"), recallEvent(tn, a, 2, 9, 1), sentEvent(tn, b, 3, 9, "b3"))

	ops := projections.NewDeadLetters(h.pool, projections.ParkingConfig{}, testLogger(), proj)
	var dl projections.DeadLetter
	eventually(t, 30*time.Second, func() error {
		if got := seqs(m.page(tn, b)); !reflect.DeepEqual(got, []int64{1, 2, 3}) {
			return fmt.Errorf("conversation b = %v", got)
		}
		list, err := ops.ListDeadLetters(testCtx(t), projections.ListFilter{Status: projections.StatusOpen})
		if err != nil || len(list) != 1 || list[0].Parked != 2 {
			return fmt.Errorf("dead letters %+v, %v", list, err)
		}
		dl = list[0]
		return nil
	})
	if got := seqs(m.page(tn, a)); !reflect.DeepEqual(got, []int64{1}) {
		t.Fatalf("conversation a before replay = %v, want only seq 1", got)
	}
	recs := h.deadLetterRecords(1)
	if len(recs) != 1 || headers(recs[0])["reason"] != projections.ReasonRetriesExhausted ||
		headers(recs[0])["consumer_group"] != projections.GroupMessagesMySQL {
		t.Fatalf("dead-letter records %v", recs)
	}

	failing.Store(false)
	res, err := ops.ReplayDeadLetter(testCtx(t), dl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Drained != 2 {
		t.Errorf("drained %d, want 2", res.Drained)
	}
	msgs := m.page(tn, a)
	if got := seqs(msgs); !reflect.DeepEqual(got, []int64{1, 2, 3}) {
		t.Fatalf("conversation a after replay = %v", got)
	}
	if !msgs[1].Recalled() {
		t.Errorf("the parked recall of seq 2 was not applied after its message: %+v", msgs[1])
	}
}

// TestMySQLTenantsAreIsolated gives two tenants the same topic and user ids.
func TestMySQLTenantsAreIsolated(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	m := newMySQL(t)
	t1, t2 := m.tenant("one"), m.tenant("two")
	h.run(h.config(), projections.MessagesMySQL(m.store, ""))
	g := groupTopic(7)
	h.publish(sentEvent(t1, g, 1, 3, "one-1"), sentEvent(t2, g, 1, 3, "two-1"), sentEvent(t1, g, 2, 4, "one-2"))
	eventually(t, 30*time.Second, func() error {
		if a, b := len(m.page(t1, g)), len(m.page(t2, g)); a != 2 || b != 1 {
			return fmt.Errorf("tenant one has %d, tenant two %d messages", a, b)
		}
		return nil
	})
	for _, msg := range m.page(t1, g) {
		if c := string(msg.Content); c != `"one-1"` && c != `"one-2"` {
			t.Errorf("tenant one sees %s", c)
		}
	}
	if c := string(m.page(t2, g)[0].Content); c != `"two-1"` {
		t.Errorf("tenant two sees %s", c)
	}
}

// TestUnknownTenantIsDeadLettered sends an event of a tenant without a database.
func TestUnknownTenantIsDeadLettered(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	m := newMySQL(t)
	p, _ := h.run(h.config(), projections.MessagesMySQL(m.store, ""))
	ghost := domain.MustTenantID("ghost")
	h.publish(sentEvent(ghost, groupTopic(1), 1, 1, "boo"))
	recs := h.deadLetterRecords(1)
	if len(recs) != 1 || headers(recs[0])["reason"] != projections.ReasonUnknownTenant {
		t.Fatalf("dead-letter records %v", recs)
	}
	if got := p.Metrics().Retries(projections.GroupMessagesMySQL); got != 0 {
		t.Errorf("retries %v, want none for an unknown tenant", got)
	}
	// Provisioning the tenant and replaying fixes it.
	m.tenant("ghost")
	ops := projections.NewDeadLetters(h.pool, projections.ParkingConfig{}, testLogger(), projections.MessagesMySQL(m.store, ""))
	var list []projections.DeadLetter
	eventually(t, 10*time.Second, func() error { // the Postgres row follows the Kafka record
		var err error
		if list, err = ops.ListDeadLetters(testCtx(t), projections.ListFilter{}); err != nil || len(list) != 1 {
			return fmt.Errorf("dead letters %v, %v", list, err)
		}
		return nil
	})
	if _, err := ops.ReplayDeadLetter(testCtx(t), list[0].ID); err != nil {
		t.Fatal(err)
	}
	if n := m.counts(ghost).GroupMessages; n != 1 {
		t.Errorf("after replay: %d messages", n)
	}
}

// TestReplayOfAnUnknownEventTypeIsRefused dead-letters an event of a type this build does not
// know (a newer writer's): replaying it with this build is refused and leaves the dead letter open
// with the events parked behind it, instead of marking it replayed while nothing applied it.
func TestReplayOfAnUnknownEventTypeIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	m := newMySQL(t)
	tn := m.tenant("future")
	proj := projections.MessagesMySQL(m.store, "")
	h.run(h.config(), proj)
	future := sentEvent(tn, groupTopic(1), 1, 9, "from a newer build")
	future.EventType = "message.group.sent.v9"
	if _, _, err := h.producer.SendMessage(record(h.kcfg.Topic(tkafka.TopicGroupMessagePersist), future)); err != nil {
		t.Fatal(err)
	}
	h.publish(sentEvent(tn, groupTopic(1), 2, 9, "after it"))
	ops := projections.NewDeadLetters(h.pool, projections.ParkingConfig{}, testLogger(), proj)
	var dl projections.DeadLetter
	eventually(t, 30*time.Second, func() error {
		list, err := ops.ListDeadLetters(testCtx(t), projections.ListFilter{TenantID: tn.String()})
		if err != nil || len(list) != 1 || list[0].Reason != projections.ReasonUnknownEventType || list[0].Parked != 1 {
			return fmt.Errorf("dead letters %+v, %v", list, err)
		}
		dl = list[0]
		return nil
	})
	res, err := ops.ReplayDeadLetter(testCtx(t), dl.ID)
	if err == nil || !strings.Contains(err.Error(), "message.group.sent.v9") {
		t.Errorf("replay of an event of an unknown type: %s, %d parked events applied, %v; want a refusal naming the type",
			res.DeadLetter.Status, res.Drained, err)
	}
	list, err := ops.ListDeadLetters(testCtx(t), projections.ListFilter{TenantID: tn.String()})
	if err != nil || len(list) != 1 || list[0].Status != projections.StatusOpen || list[0].Parked != 1 {
		t.Errorf("dead letters after the refused replay: %d (%v); want it open with one parked event", len(list), err)
		for _, d := range list {
			t.Logf("dead letter %d: %s, %d parked", d.ID, d.Status, d.Parked)
		}
	}
	if got := seqs(m.page(tn, groupTopic(1))); len(got) != 0 {
		t.Errorf("conversation after the refused replay = %v, want nothing applied", got)
	}
}

// proxy forwards TCP connections to a target; Close drops every connection and stops
// listening, Open listens again on the same port.
type proxy struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
}

func newProxy(t testing.TB, target string) *proxy {
	p := &proxy{target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Close)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *proxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil {
		p.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
	_, _ = io.Copy(c, up)
	_ = c.Close()
}

func (p *proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

func (p *proxy) Open(t testing.TB) {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("reopen proxy on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// TestMySQLOutageMidRun cuts the projector off MySQL mid-run and reconnects it: it must pause,
// retry, and end with every event exactly once and nothing dead-lettered.
func TestMySQLOutageMidRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	m := newMySQL(t)
	tn := m.tenant("outage")
	px := newProxy(t, "127.0.0.1:3306")
	viaProxy := m.routerAt("root@tcp(" + px.addr + ")/")
	p, _ := h.run(h.config(), projections.MessagesMySQL(msgstore.NewStore(viaProxy), ""))

	batch := func(from, to int64) []domain.Envelope {
		var out []domain.Envelope
		for seq := from; seq <= to; seq++ {
			for g := int64(1); g <= 5; g++ {
				out = append(out, sentEvent(tn, groupTopic(g), seq, 2, "x"))
			}
		}
		return out
	}
	h.publish(batch(1, 40)...)
	eventually(t, 30*time.Second, func() error {
		if n := m.counts(tn).GroupMessages; n < 50 {
			return fmt.Errorf("%d messages so far", n)
		}
		return nil
	})
	px.Close()
	h.publish(batch(41, 100)...)
	time.Sleep(1500 * time.Millisecond)
	if n := m.counts(tn).GroupMessages; n >= 500 {
		t.Fatalf("%d messages written while MySQL was unreachable", n)
	}
	px.Open(t)
	want := msgstore.TableCounts{GroupMessages: 500, ReadMarks: 5}
	eventually(t, 60*time.Second, func() error {
		if got := m.counts(tn); got != want {
			return fmt.Errorf("counts %+v, want %+v", got, want)
		}
		return nil
	})
	for g := int64(1); g <= 5; g++ {
		if got := len(m.page(tn, groupTopic(g))); got != 100 {
			t.Errorf("grp%d has %d messages, want 100", g, got)
		}
	}
	if got := p.Metrics().Retries(projections.GroupMessagesMySQL); got == 0 {
		t.Error("no retries counted during the outage")
	}
	for _, r := range []string{projections.ReasonRetriesExhausted, projections.ReasonUnknownTenant, projections.ReasonBadEvent} {
		if got := p.Metrics().DeadLetters(projections.GroupMessagesMySQL, r); got != 0 {
			t.Errorf("%v dead letters (%s) from a transient outage", got, r)
		}
	}
}
