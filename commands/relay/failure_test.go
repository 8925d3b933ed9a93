package relay_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/domain"
)

// While Kafka refuses produce requests the checkpoint stays put; when Kafka is back the relay
// catches up and nothing is missing.
func TestKafkaOutageDoesNotMoveCheckpoint(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	var down atomic.Bool
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if down.Load() {
			return nil, errors.New("broker unavailable"), true // closes the connection
		}
		return nil, nil, false
	})

	e := newEnv(t, cluster.ListenAddrs(), true)
	tenant := domain.MustTenantID("acme")
	reg := prometheus.NewRegistry()
	r := e.newRelay(e.fastConfig(), reg)
	start(t, e.ctx, r)
	c := e.collector()
	before := e.appendEvents(tenant, "grp1", domain.EventGroupMessageSent, 5, "")
	c.waitFor(e.ctx, before, 10*time.Second)
	waitUntil(t, 5*time.Second, func() bool { return r.Stats().Events == 5 })
	cp := r.Stats().Cursor

	down.Store(true)
	during := e.appendEvents(tenant, "grp1", domain.EventGroupMessageSent, 5, "")
	waitUntil(t, 20*time.Second, func() bool { return sumCounter(t, reg, "imledger_relay_publish_errors_total") >= 2 })
	if got, err := e.store.LoadCheckpoint(e.ctx, "default"); err != nil || got != cp {
		t.Fatalf("checkpoint moved to %+v (err %v) while Kafka was down; want %+v", got, err, cp)
	}

	down.Store(false)
	after := e.appendEvents(tenant, "grp2", domain.EventGroupMessageSent, 5, "")
	c.waitFor(e.ctx, append(during, after...), 30*time.Second)
	c.checkStreams(e)
}

// An event whose type this build does not know stops the relay there: events before it are
// published, nothing after it, until the type is known.
func TestUnknownEventTypeBlocksUntilKnown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, true)
	tenant := domain.MustTenantID("acme")
	reg := prometheus.NewRegistry()
	r := e.newRelay(e.fastConfig(), reg)

	before := e.appendEvents(tenant, "grp1", domain.EventGroupMessageSent, 3, "")
	unknownType := domain.EventType("test.relay.mystery_" + tenant.String() + "_" + time.Now().Format("150405.000000") + ".v1")
	tx, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	mystery := rawEvent(t, tenant, "grp9", 1, unknownType)
	insertRaw(e.ctx, t, tx, mystery)
	if err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	after := e.appendEvents(tenant, "grp2", domain.EventGroupMessageSent, 3, "")

	start(t, e.ctx, r)
	c := e.collector()
	c.waitFor(e.ctx, before, 10*time.Second)
	waitUntil(t, 10*time.Second, func() bool { return gaugeValue(t, reg, "imledger_relay_blocked") == 1 })
	c.poll(e.ctx, 300*time.Millisecond)
	for _, ev := range append(after, mystery) {
		if c.seen[ev.EventID.String()] {
			t.Fatalf("event %s after the unknown one was published", ev.EventID)
		}
	}

	// A build that knows the type takes over (here: the same process, once it is registered).
	domain.RegisterEventType(domain.EventInfo{Type: unknownType, SchemaVersion: 1, Category: domain.CategoryBusiness,
		BizType: "test", Payload: func() any { return &struct{}{} }})
	c.waitFor(e.ctx, append([]domain.Envelope{mystery}, after...), 10*time.Second)
	for _, rec := range c.recs {
		if id, _ := header(rec, "event_id"); id == mystery.EventID.String() && rec.Topic != e.kcfg.Topic("im.business.event") {
			t.Errorf("registered business event went to %s", rec.Topic)
		}
	}
	if v := gaugeValue(t, reg, "imledger_relay_blocked"); v != 0 {
		t.Errorf("blocked gauge = %v after the relay moved on", v)
	}
}

// crashingStore fails one checkpoint save and cancels the relay at that moment, as if the process
// died after Kafka acked a batch but before its checkpoint was saved.
type crashingStore struct {
	*eventstore.Store
	saves   atomic.Int32
	crashAt int32
	crash   context.CancelFunc
}

func (s *crashingStore) SaveRelayProgress(ctx context.Context, name string, term int64, c eventstore.Cursor, offsets []eventstore.PartitionOffset) error {
	if s.saves.Add(1) == s.crashAt {
		s.crash()
		return errors.New("process died")
	}
	return s.Store.SaveRelayProgress(ctx, name, term, c, offsets)
}

// A crash between the acks and the checkpoint republishes that batch: duplicates, never gaps.
func TestCrashBeforeCheckpointRepublishesBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, true)
	tenant := domain.MustTenantID("acme")
	var want []domain.Envelope
	for i := range 10 {
		want = append(want, e.appendEvents(tenant, "grp"+strconv.Itoa(i%3), domain.EventGroupMessageSent, 10, "")...)
	}
	cfg := e.fastConfig()
	cfg.BatchSize = 10

	ctx, crash := context.WithCancel(e.ctx)
	cs := &crashingStore{Store: e.store, crashAt: 4, crash: crash}
	r1, err := relay.New(cs, e.pool, cfg, testLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r1.Stats().Events; got != 30 {
		t.Fatalf("relay checkpointed %d events before the crash, want 30", got)
	}

	r2 := e.newRelay(cfg, nil)
	start(t, e.ctx, r2)
	c := e.collector()
	c.waitFor(e.ctx, want, 20*time.Second)
	waitUntil(t, 5*time.Second, func() bool { return r2.Stats().Events == 70 })
	c.poll(e.ctx, 200*time.Millisecond)
	if dups := c.checkStreams(e); dups != 10 {
		t.Errorf("%d duplicates, want the 10 events of the batch whose checkpoint was lost", dups)
	}
}

// A produce request the broker never answers does not hold up a stop past StopTimeout, and the
// checkpoint does not move.
func TestStopTimeoutBoundsHangingPublish(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	var hang atomic.Bool
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		return nil, nil, hang.Load() // handled without a response: the client waits
	})
	e := newEnv(t, cluster.ListenAddrs(), true)
	e.kcfg.DialTimeout = 300 * time.Millisecond // so the producer itself gives up within seconds
	e.kcfg.ProduceRetries = 1
	tenant := domain.MustTenantID("acme")
	cfg := e.fastConfig()
	cfg.StopTimeout = 300 * time.Millisecond
	reg := prometheus.NewRegistry()
	r := e.newRelay(cfg, reg)
	stop := start(t, e.ctx, r)
	c := e.collector()
	first := e.appendEvents(tenant, "grp1", domain.EventGroupMessageSent, 3, "")
	c.waitFor(e.ctx, first, 10*time.Second)
	waitUntil(t, 5*time.Second, func() bool { return r.Stats().Events == 3 })
	cp := r.Stats().Cursor

	hang.Store(true)
	e.appendEvents(tenant, "grp1", domain.EventGroupMessageSent, 3, "")
	time.Sleep(200 * time.Millisecond) // the relay is now waiting for acks that do not come
	begin := time.Now()
	stop()
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("Run took %s to return with StopTimeout %s", took, cfg.StopTimeout)
	}
	if got, err := e.store.LoadCheckpoint(e.ctx, "default"); err != nil || got != cp {
		t.Errorf("checkpoint %+v (err %v), want it unchanged at %+v", got, err, cp)
	}
	hang.Store(false)
}
