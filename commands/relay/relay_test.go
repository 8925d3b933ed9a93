package relay_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/domain"
)

const validTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestRelayPublishesEveryEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, true)
	acme, beta := domain.MustTenantID("acme"), domain.MustTenantID("beta")
	var want []domain.Envelope
	want = append(want, e.appendEvents(acme, "grp7", domain.EventGroupMessageSent, 30, validTraceparent)...)
	want = append(want, e.appendEvents(acme, "grp7/m/3", domain.EventGroupMessageEdited, 2, "not-a-traceparent")...)
	want = append(want, e.appendEvents(beta, "grp7", domain.EventGroupMessageSent, 5, "")...)
	want = append(want, e.appendEvents(beta, "p2p1_2", domain.EventDirectMessageSent, 12, "")...)

	reg := prometheus.NewRegistry()
	cfg := e.fastConfig()
	cfg.BatchSize = 7 // several batches
	r := e.newRelay(cfg, reg)
	start(t, e.ctx, r)
	// Appends after the relay started arrive too (woken by NOTIFY or the poll).
	want = append(want, e.appendEvents(acme, "grp7", domain.EventGroupMessageSent, 3, "")...)

	c := e.collector()
	c.waitFor(e.ctx, want, 20*time.Second)
	byID := map[string]domain.Envelope{}
	for _, w := range want {
		byID[w.EventID.String()] = w
	}
	for _, rec := range c.recs {
		id, _ := header(rec, relay.HeaderEventID)
		w, ok := byID[id]
		if !ok {
			t.Fatalf("unexpected event %q on Kafka", id)
		}
		info, _ := domain.LookupEventType(w.EventType)
		wantTopic, _ := e.kcfg.CategoryTopic(string(info.Category))
		if rec.Topic != wantTopic {
			t.Errorf("event %s (%s) on topic %s, want %s", id, w.EventType, rec.Topic, wantTopic)
		}
		wantKey := w.TenantID.String() + ":" + domain.ConversationKey(w.StreamID)
		if string(rec.Key) != wantKey {
			t.Errorf("event %s key %q, want %q", id, rec.Key, wantKey)
		}
		headers := map[string]string{
			relay.HeaderEventType:     string(w.EventType),
			relay.HeaderTenantID:      w.TenantID.String(),
			relay.HeaderStreamVersion: strconv.FormatInt(w.StreamVersion, 10),
		}
		for k, v := range headers {
			if got, _ := header(rec, k); got != v {
				t.Errorf("event %s header %s = %q, want %q", id, k, got, v)
			}
		}
		tp, hasTP := header(rec, relay.HeaderTraceparent)
		if w.TraceID == validTraceparent && tp != validTraceparent || w.TraceID != validTraceparent && hasTP {
			t.Errorf("event %s trace_id %q gave traceparent header %q (present %v)", id, w.TraceID, tp, hasTP)
		}
		got := decode(t, rec)
		if got.EventID != w.EventID || got.Position != w.Position || got.Position == 0 || got.StreamID != w.StreamID ||
			got.TraceID != w.TraceID || !got.OccurredAt.Equal(w.OccurredAt) {
			t.Errorf("event %s value differs from the stored envelope:\n got %+v\nwant %+v", id, got, w)
		}
	}
	if dups := c.checkStreams(e); dups != 0 {
		t.Errorf("%d duplicates without any restart", dups)
	}

	// Checkpoint, stats and metrics agree once everything is relayed.
	waitUntil(t, 10*time.Second, func() bool { return r.Stats().Events == int64(len(want)) })
	cp, err := e.store.LoadCheckpoint(e.ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); cp != st.Cursor || !st.Active || st.Batches < int64(len(want)/7) {
		t.Errorf("checkpoint %+v, stats %+v", cp, st)
	}
	if n := gaugeValue(t, reg, "imledger_relay_leader"); n != 1 {
		t.Errorf("leader gauge = %v, want 1", n)
	}
	if n := sumCounter(t, reg, "imledger_relay_events_total"); n != float64(len(want)) {
		t.Errorf("events_total = %v, want %d", n, len(want))
	}
}

func TestRelayCreatesTopicsOnStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, false)
	e.kcfg.Partitions = 3
	cfg := e.fastConfig()
	cfg.Kafka = e.kcfg
	want := e.appendEvents(domain.MustTenantID("acme"), "grp1", domain.EventGroupMessageSent, 3, "")
	r := e.newRelay(cfg, nil)
	start(t, e.ctx, r)
	c := e.collector()
	c.waitFor(e.ctx, want, 20*time.Second)

	admin, err := sarama.NewClusterAdmin(e.kcfg.Brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	topics, err := admin.ListTopics()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range e.kcfg.Topics() {
		if d, ok := topics[name]; !ok || d.NumPartitions != 3 {
			t.Errorf("topic %s: exists %v with %d partitions, want 3", name, ok, d.NumPartitions)
		}
	}
}

// A relay stopped mid-run, while appends continue, and a fresh relay started after it: nothing
// appended is missing on Kafka, and per-stream order holds after dedupe by event id.
func TestRelayRestartMidRunLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, true)
	cfg := e.fastConfig()
	cfg.BatchSize = 20
	tenant := domain.MustTenantID("acme")

	var stopping atomic.Bool
	appended := make(chan []domain.Envelope)
	go func() {
		var all []domain.Envelope
		for i := 0; !stopping.Load(); i++ {
			stream := "grp" + strconv.Itoa(i%5)
			envs, err := e.tryAppend(e.ctx, tenant, stream, domain.EventGroupMessageSent, 1+i%3, "")
			if err != nil {
				break
			}
			all = append(all, envs...)
			time.Sleep(time.Millisecond)
		}
		appended <- all
	}()

	r1 := e.newRelay(cfg, nil)
	stop1 := start(t, e.ctx, r1)
	waitUntil(t, 20*time.Second, func() bool { return r1.Stats().Events > 100 })
	stop1() // mid-run: appends continue
	st := r1.Stats()
	cp, err := e.store.LoadCheckpoint(e.ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if cp != st.Cursor || cp == (eventstore.Cursor{}) {
		t.Fatalf("after a graceful stop the checkpoint %+v should be the last batch's cursor %+v", cp, st.Cursor)
	}
	if st.Active {
		t.Error("stopped relay still reports itself active")
	}
	time.Sleep(100 * time.Millisecond) // appends while no relay runs

	r2 := e.newRelay(cfg, nil)
	start(t, e.ctx, r2)
	waitUntil(t, 20*time.Second, func() bool { return r2.Stats().Events > 100 })
	stopping.Store(true)
	want := <-appended

	c := e.collector()
	c.waitFor(e.ctx, want, 30*time.Second)
	dups := c.checkStreams(e)
	t.Logf("%d events appended, relayed %d + %d, %d duplicates on Kafka", len(want), st.Events, r2.Stats().Events, dups)
}

// TestRelayLingerJoinsTheCommitsOfAWindow: commits that arrive while the relay lingers after an
// idle pause go out in one batch, not one Kafka transaction each.
func TestRelayLingerJoinsTheCommitsOfAWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, true)
	acme := domain.MustTenantID("acme")
	cfg := e.fastConfig()
	cfg.Linger = time.Second
	r := e.newRelay(cfg, nil)
	start(t, e.ctx, r)
	waitUntil(t, 10*time.Second, func() bool { return r.Stats().Active })
	// A commit the relay's first read of its term finds goes out at once, and so does one its
	// read-ahead after a batch finds: only a relay that found nothing new waits. One event
	// relayed, then a pause for the read-ahead to come back empty, and the relay is idle.
	warm := e.appendEvents(acme, "grp-warm", domain.EventGroupMessageSent, 1, "")
	e.collector().waitFor(e.ctx, warm, 20*time.Second)
	waitUntil(t, 10*time.Second, func() bool { return r.Stats().Events == 1 })
	time.Sleep(200 * time.Millisecond)
	before := r.Stats().Batches
	var want []domain.Envelope
	began := time.Now()
	for i := range 5 {
		want = append(want, e.appendEvents(acme, "grp"+strconv.Itoa(i), domain.EventGroupMessageSent, 1, "")...)
		time.Sleep(15 * time.Millisecond)
	}
	took := time.Since(began)
	c := e.collector()
	c.waitFor(e.ctx, want, 20*time.Second)
	waitUntil(t, 10*time.Second, func() bool { return r.Stats().Events == 6 }) // checkpointed
	// The five commits take about 75 ms on an idle machine: a read falls inside that window at
	// most once, and each further Linger the appends took on a loaded one adds at most one batch.
	// Without the linger each commit would be a batch of its own.
	most := 2 + int64(took/cfg.Linger)
	if st := r.Stats(); st.Events != 6 || st.Batches-before > most {
		t.Fatalf("5 commits 15 ms apart, appended in %v, went out in %d batches (%d events with the first), want at most %d",
			took, st.Batches-before, st.Events, most)
	}
}

// TestIdleRelayWaitsForCommits: a relay with nothing to publish reads once per IdlePoll, not
// once per MaxPoll, yet an append wakes it at once (its commit's notification): idle costs one
// read per IdlePoll, and a commit is relayed without waiting for it.
func TestIdleRelayWaitsForCommits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, true)
	acme := domain.MustTenantID("acme")
	cfg := e.fastConfig()
	cfg.Linger, cfg.IdlePoll = -1, 2*time.Second
	r := e.newRelay(cfg, nil)
	start(t, e.ctx, r)
	waitUntil(t, 10*time.Second, func() bool { return r.Stats().Active })
	warm := e.appendEvents(acme, "grp-warm", domain.EventGroupMessageSent, 1, "")
	e.collector().waitFor(e.ctx, warm, 20*time.Second)
	// The short series after the batch runs out, and so does the chase of the warm commit's own
	// signal, which may arrive after the batch it announced was relayed.
	time.Sleep(cfg.IdlePoll + 500*time.Millisecond)
	before := r.Stats().Reads
	time.Sleep(3 * time.Second)
	// At MaxPoll (50 ms) an idle second would be 20 reads; at IdlePoll, one or two in 3 s.
	if n := r.Stats().Reads - before; n > 3 {
		t.Fatalf("an idle relay read %d times in 3 s, want at most 3 with an IdlePoll of %s", n, cfg.IdlePoll)
	}
	// The commit wakes the relay at once. (When it is relayed also depends on the transactions of
	// the whole PostgreSQL cluster: the commit-safe horizon waits for older ones.)
	published, reads := r.Stats().Events, r.Stats().Reads
	began := time.Now()
	e.appendEvents(acme, "grp-woken", domain.EventGroupMessageSent, 1, "")
	waitUntil(t, 20*time.Second, func() bool { return r.Stats().Reads > reads })
	if took := time.Since(began); took > time.Second {
		t.Errorf("an idle relay read %v after an append, want it woken by the commit, well within IdlePoll", took)
	}
	waitUntil(t, 20*time.Second, func() bool { return r.Stats().Events > published })
}
