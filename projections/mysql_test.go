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

	"github.com/imledger/imledger/projections/projtest"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// TestMySQLEveryEventDeliveredTwice republishes the whole batch: every event must give exactly
// one row, whatever the second delivery finds.
func TestMySQLEveryEventDeliveredTwice(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	tn := m.Tenant("dup")
	p, _ := h.Run(h.Config(), projections.MessagesMySQL(m.Store, ""))
	var events []domain.Envelope
	for seq := int64(1); seq <= 60; seq++ {
		for g := int64(1); g <= 10; g++ {
			events = append(events, projtest.SentEvent(tn, projtest.GroupTopic(g), seq, domain.UserID(g), "hello"))
		}
	}
	h.Publish(events...)
	h.Publish(events...)
	want := msgstore.TableCounts{GroupMessages: int64(len(events)), ReadMarks: 10}
	projtest.Eventually(t, 40*time.Second, func() error {
		if got := m.Counts(tn); got != want {
			return fmt.Errorf("counts %+v, want %+v", got, want)
		}
		return nil
	})
	projtest.Eventually(t, 20*time.Second, func() error {
		lags, err := p.Lag(projtest.Ctx(t))
		if err != nil || lags[0].Events != 0 {
			return fmt.Errorf("lag %+v, %v", lags, err)
		}
		return nil
	})
	if got := m.Counts(tn); got != want {
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
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	tn := m.Tenant("sre")
	h.Run(h.Config(), projections.MessagesMySQL(m.Store, ""))
	g := projtest.GroupTopic(42)
	h.Publish(
		projtest.SentEvent(tn, g, 1, 5, "first"),
		projtest.SentEvent(tn, g, 2, 6, "second"),
		projtest.SentEvent(tn, g, 3, 5, "third"),
		projtest.RecallEvent(tn, g, 2, 6, 1),
		projtest.EditEvent(tn, g, 3, 5, 2, "third, edited"),
		projtest.EditEvent(tn, g, 3, 5, 3, "third, edited twice"),
	)
	projtest.Eventually(t, 30*time.Second, func() error {
		msgs := m.Page(tn, g)
		if len(msgs) != 3 || !msgs[1].Recalled() || msgs[2].Version != 3 {
			return fmt.Errorf("messages %+v", msgs)
		}
		return nil
	})
	msgs := m.Page(tn, g)
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
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	tn := m.Tenant("poison")
	a, b := projtest.GroupTopic(1), projtest.GroupTopic(2)
	poisoned := projtest.SentEvent(tn, a, 2, 9, "a2")
	var failing atomic.Bool
	failing.Store(true)
	proj := projections.MessagesMySQL(m.Store, "")
	proj.Applier = projections.FailOn(proj.Applier, func(e domain.Envelope) error {
		if failing.Load() && e.EventID == poisoned.EventID {
			return errors.New("simulated constraint violation")
		}
		return nil
	})
	h.Run(h.Config(), proj)
	h.Publish(projtest.SentEvent(tn, a, 1, 9, "a1"), projtest.SentEvent(tn, b, 1, 9, "b1"), poisoned, projtest.SentEvent(tn, b, 2, 9, "b2"),
		projtest.SentEvent(tn, a, 3, 9, "a3"), projtest.RecallEvent(tn, a, 2, 9, 1), projtest.SentEvent(tn, b, 3, 9, "b3"))

	ops := projections.NewDeadLetters(h.Pool, projections.ParkingConfig{}, projtest.Logger(), proj)
	var dl projections.DeadLetter
	projtest.Eventually(t, 30*time.Second, func() error {
		if got := projtest.Seqs(m.Page(tn, b)); !reflect.DeepEqual(got, []int64{1, 2, 3}) {
			return fmt.Errorf("conversation b = %v", got)
		}
		list, err := ops.ListDeadLetters(projtest.Ctx(t), projections.ListFilter{Status: projections.StatusOpen})
		if err != nil || len(list) != 1 || list[0].Parked != 2 {
			return fmt.Errorf("dead letters %+v, %v", list, err)
		}
		dl = list[0]
		return nil
	})
	if got := projtest.Seqs(m.Page(tn, a)); !reflect.DeepEqual(got, []int64{1}) {
		t.Fatalf("conversation a before replay = %v, want only seq 1", got)
	}
	recs := h.DeadLetterRecords(1)
	if len(recs) != 1 || headers(recs[0])["reason"] != projections.ReasonRetriesExhausted ||
		headers(recs[0])["consumer_group"] != projections.GroupMessagesMySQL {
		t.Fatalf("dead-letter records %v", recs)
	}

	failing.Store(false)
	res, err := ops.ReplayDeadLetter(projtest.Ctx(t), dl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Drained != 2 {
		t.Errorf("drained %d, want 2", res.Drained)
	}
	msgs := m.Page(tn, a)
	if got := projtest.Seqs(msgs); !reflect.DeepEqual(got, []int64{1, 2, 3}) {
		t.Fatalf("conversation a after replay = %v", got)
	}
	if !msgs[1].Recalled() {
		t.Errorf("the parked recall of seq 2 was not applied after its message: %+v", msgs[1])
	}
}

// TestMySQLTenantsAreIsolated gives two tenants the same topic and user ids.
func TestMySQLTenantsAreIsolated(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	t1, t2 := m.Tenant("one"), m.Tenant("two")
	h.Run(h.Config(), projections.MessagesMySQL(m.Store, ""))
	g := projtest.GroupTopic(7)
	h.Publish(projtest.SentEvent(t1, g, 1, 3, "one-1"), projtest.SentEvent(t2, g, 1, 3, "two-1"), projtest.SentEvent(t1, g, 2, 4, "one-2"))
	projtest.Eventually(t, 30*time.Second, func() error {
		if a, b := len(m.Page(t1, g)), len(m.Page(t2, g)); a != 2 || b != 1 {
			return fmt.Errorf("tenant one has %d, tenant two %d messages", a, b)
		}
		return nil
	})
	for _, msg := range m.Page(t1, g) {
		if c := string(msg.Content); c != `"one-1"` && c != `"one-2"` {
			t.Errorf("tenant one sees %s", c)
		}
	}
	if c := string(m.Page(t2, g)[0].Content); c != `"two-1"` {
		t.Errorf("tenant two sees %s", c)
	}
}

// TestUnknownTenantIsDeadLettered sends an event of a tenant without a database.
func TestUnknownTenantIsDeadLettered(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	p, _ := h.Run(h.Config(), projections.MessagesMySQL(m.Store, ""))
	ghost := domain.MustTenantID("ghost")
	h.Publish(projtest.SentEvent(ghost, projtest.GroupTopic(1), 1, 1, "boo"))
	recs := h.DeadLetterRecords(1)
	if len(recs) != 1 || headers(recs[0])["reason"] != projections.ReasonUnknownTenant {
		t.Fatalf("dead-letter records %v", recs)
	}
	if got := p.Metrics().Retries(projections.GroupMessagesMySQL); got != 0 {
		t.Errorf("retries %v, want none for an unknown tenant", got)
	}
	// Provisioning the tenant and replaying fixes it.
	m.Tenant("ghost")
	ops := projections.NewDeadLetters(h.Pool, projections.ParkingConfig{}, projtest.Logger(), projections.MessagesMySQL(m.Store, ""))
	var list []projections.DeadLetter
	projtest.Eventually(t, 10*time.Second, func() error { // the Postgres row follows the Kafka record
		var err error
		if list, err = ops.ListDeadLetters(projtest.Ctx(t), projections.ListFilter{}); err != nil || len(list) != 1 {
			return fmt.Errorf("dead letters %v, %v", list, err)
		}
		return nil
	})
	if _, err := ops.ReplayDeadLetter(projtest.Ctx(t), list[0].ID); err != nil {
		t.Fatal(err)
	}
	if n := m.Counts(ghost).GroupMessages; n != 1 {
		t.Errorf("after replay: %d messages", n)
	}
}

// TestReplayOfAnUnknownEventTypeIsRefused dead-letters an event of a type this build does not
// know (a newer writer's): replaying it with this build is refused and leaves the dead letter open
// with the events parked behind it, instead of marking it replayed while nothing applied it.
func TestReplayOfAnUnknownEventTypeIsRefused(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	tn := m.Tenant("future")
	proj := projections.MessagesMySQL(m.Store, "")
	h.Run(h.Config(), proj)
	future := projtest.SentEvent(tn, projtest.GroupTopic(1), 1, 9, "from a newer build")
	future.EventType = "message.group.sent.v9"
	if _, _, err := h.Producer.SendMessage(projtest.Record(h.Kafka.Topic(tkafka.TopicGroupMessagePersist), future)); err != nil {
		t.Fatal(err)
	}
	h.Publish(projtest.SentEvent(tn, projtest.GroupTopic(1), 2, 9, "after it"))
	ops := projections.NewDeadLetters(h.Pool, projections.ParkingConfig{}, projtest.Logger(), proj)
	var dl projections.DeadLetter
	projtest.Eventually(t, 30*time.Second, func() error {
		list, err := ops.ListDeadLetters(projtest.Ctx(t), projections.ListFilter{TenantID: tn.String()})
		if err != nil || len(list) != 1 || list[0].Reason != projections.ReasonUnknownEventType || list[0].Parked != 1 {
			return fmt.Errorf("dead letters %+v, %v", list, err)
		}
		dl = list[0]
		return nil
	})
	res, err := ops.ReplayDeadLetter(projtest.Ctx(t), dl.ID)
	if err == nil || !strings.Contains(err.Error(), "message.group.sent.v9") {
		t.Errorf("replay of an event of an unknown type: %s, %d parked events applied, %v; want a refusal naming the type",
			res.DeadLetter.Status, res.Drained, err)
	}
	list, err := ops.ListDeadLetters(projtest.Ctx(t), projections.ListFilter{TenantID: tn.String()})
	if err != nil || len(list) != 1 || list[0].Status != projections.StatusOpen || list[0].Parked != 1 {
		t.Errorf("dead letters after the refused replay: %d (%v); want it open with one parked event", len(list), err)
		for _, d := range list {
			t.Logf("dead letter %d: %s, %d parked", d.ID, d.Status, d.Parked)
		}
	}
	if got := projtest.Seqs(m.Page(tn, projtest.GroupTopic(1))); len(got) != 0 {
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
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	tn := m.Tenant("outage")
	px := newProxy(t, "127.0.0.1:3306")
	viaProxy := m.RouterAt("root@tcp(" + px.addr + ")/")
	p, _ := h.Run(h.Config(), projections.MessagesMySQL(msgstore.NewStore(viaProxy), ""))

	batch := func(from, to int64) []domain.Envelope {
		var out []domain.Envelope
		for seq := from; seq <= to; seq++ {
			for g := int64(1); g <= 5; g++ {
				out = append(out, projtest.SentEvent(tn, projtest.GroupTopic(g), seq, 2, "x"))
			}
		}
		return out
	}
	h.Publish(batch(1, 40)...)
	projtest.Eventually(t, 30*time.Second, func() error {
		if n := m.Counts(tn).GroupMessages; n < 50 {
			return fmt.Errorf("%d messages so far", n)
		}
		return nil
	})
	px.Close()
	h.Publish(batch(41, 100)...)
	time.Sleep(1500 * time.Millisecond)
	if n := m.Counts(tn).GroupMessages; n >= 500 {
		t.Fatalf("%d messages written while MySQL was unreachable", n)
	}
	px.Open(t)
	want := msgstore.TableCounts{GroupMessages: 500, ReadMarks: 5}
	projtest.Eventually(t, 60*time.Second, func() error {
		if got := m.Counts(tn); got != want {
			return fmt.Errorf("counts %+v, want %+v", got, want)
		}
		return nil
	})
	for g := int64(1); g <= 5; g++ {
		if got := len(m.Page(tn, projtest.GroupTopic(g))); got != 100 {
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
