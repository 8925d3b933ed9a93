package relay_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/domain"
)

// holdingStore stalls the relay while hold is set, as if the process were paused or cut off by
// a network partition: in SaveRelayProgress (between a publish and its checkpoint), or with
// holdReads in ReadCommitted (between reading a batch and publishing it).
type holdingStore struct {
	*eventstore.Store
	hold      atomic.Bool
	holdReads bool
	held      chan eventstore.Cursor // receives the cursor of the first held call
	release   chan struct{}
	once      sync.Once
}

func newHoldingStore(s *eventstore.Store, holdReads bool) *holdingStore {
	return &holdingStore{Store: s, holdReads: holdReads, held: make(chan eventstore.Cursor, 1), release: make(chan struct{})}
}

func (s *holdingStore) stall(c eventstore.Cursor) {
	if s.hold.Load() {
		s.once.Do(func() { s.held <- c })
		<-s.release
	}
}

func (s *holdingStore) SaveRelayProgress(ctx context.Context, name string, term int64, c eventstore.Cursor, offsets []eventstore.PartitionOffset) error {
	if !s.holdReads {
		s.stall(c)
	}
	return s.Store.SaveRelayProgress(ctx, name, term, c, offsets)
}

func (s *holdingStore) ReadCommitted(ctx context.Context, after eventstore.Cursor, limit int) ([]eventstore.Record, error) {
	recs, err := s.Store.ReadCommitted(ctx, after, limit)
	if s.holdReads && err == nil && len(recs) > 0 {
		s.stall(recs[len(recs)-1].Cursor)
	}
	return recs, err
}

// writer appends events to a few conversations until stopped and returns them all.
func (e *env) writer(tenant domain.TenantID, streams int, every time.Duration) (stop func() []domain.Envelope) {
	done := make(chan struct{})
	out := make(chan []domain.Envelope, 1)
	go func() {
		var all []domain.Envelope
		defer func() { out <- all }()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(every):
			}
			evs, err := e.tryAppend(e.ctx, tenant, "grp"+string(rune('1'+i%streams)), domain.EventGroupMessageSent, 1, "")
			if err != nil {
				e.t.Errorf("writer: %v", err)
				return
			}
			all = append(all, evs...)
		}
	}()
	return func() []domain.Envelope {
		close(done)
		return <-out
	}
}

// checkpointMonitor polls the relay's checkpoint until stopped and reports whether it ever moved
// back.
func (e *env) checkpointMonitor(name string) (stop func() (backwards string)) {
	done := make(chan struct{})
	out := make(chan string, 1)
	go func() {
		var last eventstore.Cursor
		for {
			select {
			case <-done:
				out <- ""
				return
			case <-time.After(2 * time.Millisecond):
			}
			c, err := e.store.LoadCheckpoint(e.ctx, name)
			if err != nil {
				continue
			}
			if c.Before(last) {
				out <- "checkpoint moved back from " + cursorString(last) + " to " + cursorString(c)
				return
			}
			last = c
		}
	}()
	return func() string {
		close(done)
		return <-out
	}
}

func cursorString(c eventstore.Cursor) string {
	return fmt.Sprintf("(tx %d, position %d)", c.TxID, c.Position)
}

// checkProducers checks that in every partition no record of a deposed relay follows a record
// of a newer one. A record's producer is its producer id (ordered by first appearance in the
// partition) and epoch: a new term's producer either has a new id or, with the same
// transactional id, a higher epoch (kgo may also bump the epoch per transaction), so records
// must come in non-decreasing (id order, epoch).
func (c *collector) checkProducers() {
	c.t.Helper()
	type tp struct {
		topic string
		part  int32
	}
	type pos struct {
		idx   int
		epoch int16
	}
	ids := map[tp]map[int64]int{}
	last := map[tp]pos{}
	for _, r := range c.recs {
		k := tp{r.Topic, r.Partition}
		if ids[k] == nil {
			ids[k] = map[int64]int{}
		}
		i, seen := ids[k][r.ProducerID]
		if !seen {
			i = len(ids[k])
			ids[k][r.ProducerID] = i
		}
		cur, prev := pos{i, r.ProducerEpoch}, last[k]
		if cur.idx < prev.idx || cur.idx == prev.idx && cur.epoch < prev.epoch {
			c.t.Fatalf("%s/%d: the record at offset %d (producer %d, epoch %d) is a deposed relay's, after records of a newer one",
				r.Topic, r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch)
		}
		last[k] = cur
	}
}

// A relay stalled between a publish and its checkpoint loses its lock session; another relay
// takes over and publishes on. When the stalled relay wakes up it cannot move the checkpoint back
// and stops, and Kafka holds none of its records after the new relay's: every conversation stays
// in order.
func TestDeposedRelayIsFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, true)
	acme := domain.MustTenantID("acme")
	cfg := e.fastConfig()
	cfg.BatchSize = 20

	stalled := cfg
	// The stalled relay does not notice by itself that its session is gone: it pings rarely.
	stalled.LockCheck = time.Minute
	stalled.KeepaliveIdle, stalled.UserTimeout = 10*time.Minute, 10*time.Minute
	hs := newHoldingStore(e.store, false)
	r1, err := relay.New(hs, e.pool, stalled, testLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	monitor := e.checkpointMonitor("default")
	start(t, e.ctx, r1)
	stopWriter := e.writer(acme, 4, 2*time.Millisecond)
	waitUntil(t, 20*time.Second, func() bool { return r1.Stats().Events >= 60 })
	r2 := e.newRelay(cfg, nil)
	start(t, e.ctx, r2)

	hs.hold.Store(true)
	heldAt := <-hs.held
	holder := lockHolder(t, e, cfg)
	if holder == 0 {
		t.Fatal("no session holds the relay lock")
	}
	if _, err := e.pool.Exec(e.ctx, "SELECT pg_terminate_backend($1)", holder); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, func() bool { return r2.Stats().Term > r1.Stats().Term && r2.Stats().Cursor.Position > heldAt.Position })
	waitUntil(t, 20*time.Second, func() bool { return r2.Stats().Events >= 60 })
	published := r1.Stats().Events
	close(hs.release)
	waitUntil(t, 20*time.Second, func() bool { return !r1.Stats().Active })
	all := stopWriter()

	c := e.collector()
	c.waitFor(e.ctx, all, 30*time.Second)
	c.poll(e.ctx, 300*time.Millisecond)
	if why := monitor(); why != "" {
		t.Fatal(why)
	}
	if got, _ := e.store.LoadCheckpoint(e.ctx, "default"); got.Before(r2.Stats().Cursor) || got.Before(heldAt) {
		t.Fatalf("checkpoint %+v is behind the new relay's %+v", got, r2.Stats().Cursor)
	}
	if got := r1.Stats().Events; got != published {
		t.Errorf("the deposed relay checkpointed %d more events after it woke up", got-published)
	}
	c.checkStreams(e)
	c.checkProducers()
}

// A relay stalled between reading a batch and publishing it loses its lock session; another
// relay takes over. When the stalled relay wakes up and publishes, Kafka refuses it (the new
// term's producer fenced the old one), so none of its records lands after the new relay's.
func TestStalledPublishIsFencedInKafka(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, true)
	acme := domain.MustTenantID("acme")
	cfg := e.fastConfig()
	cfg.BatchSize = 20
	stalled := cfg
	stalled.LockCheck = time.Minute
	stalled.KeepaliveIdle, stalled.UserTimeout = 10*time.Minute, 10*time.Minute
	hs := newHoldingStore(e.store, true)
	r1, err := relay.New(hs, e.pool, stalled, testLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	start(t, e.ctx, r1)
	stopWriter := e.writer(acme, 4, 2*time.Millisecond)
	waitUntil(t, 20*time.Second, func() bool { return r1.Stats().Events >= 60 })
	r2 := e.newRelay(cfg, nil)
	start(t, e.ctx, r2)

	hs.hold.Store(true)
	heldAt := <-hs.held
	if _, err := e.pool.Exec(e.ctx, "SELECT pg_terminate_backend($1)", lockHolder(t, e, cfg)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, func() bool { return r2.Stats().Term > r1.Stats().Term && r2.Stats().Cursor.Position > heldAt.Position })
	published := r1.Stats().Events
	close(hs.release)
	waitUntil(t, 20*time.Second, func() bool { return !r1.Stats().Active })
	all := stopWriter()

	c := e.collector()
	c.waitFor(e.ctx, all, 30*time.Second)
	c.poll(e.ctx, 300*time.Millisecond)
	c.checkStreams(e)
	c.checkProducers()
	if got := r1.Stats().Events; got != published {
		t.Errorf("the deposed relay published %d events after it woke up", got-published)
	}
}

// Figures: how long a relay whose lock session was killed takes to stop, and how long until a
// new term publishes, with the default lock timings. The deposed relay competes for the lock
// again at once, so the new term may be its own or the standby's.
func TestRelayTakeoverAfterLockSessionKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, true)
	acme := domain.MustTenantID("acme")
	cfg := relay.Config{Kafka: e.kcfg, MinPoll: 2 * time.Millisecond, MaxPoll: 50 * time.Millisecond} // default lock timings
	r1, r2 := e.newRelay(cfg, nil), e.newRelay(cfg, nil)
	start(t, e.ctx, r1)
	waitUntil(t, 20*time.Second, func() bool { return r1.Stats().Term > 0 })
	start(t, e.ctx, r2)
	stopWriter := e.writer(acme, 4, 5*time.Millisecond)
	waitUntil(t, 20*time.Second, func() bool { return r1.Stats().Events >= 20 })

	holder := lockHolder(t, e, cfg)
	oldTerm, oldEvents := r1.Stats().Term, r1.Stats().Events
	killed := time.Now()
	if _, err := e.pool.Exec(e.ctx, "SELECT pg_terminate_backend($1)", holder); err != nil {
		t.Fatal(err)
	}
	var stopped, tookOver time.Duration
	deadline := time.Now().Add(30 * time.Second)
	for (stopped == 0 || tookOver == 0) && time.Now().Before(deadline) {
		s1, s2 := r1.Stats(), r2.Stats()
		if stopped == 0 && (!s1.Active || s1.Term > oldTerm) {
			stopped = time.Since(killed)
		}
		if tookOver == 0 && (s2.Events > 0 || s1.Term > oldTerm && s1.Events > oldEvents) {
			tookOver = time.Since(killed)
		}
		time.Sleep(time.Millisecond)
	}
	all := stopWriter()
	if stopped == 0 || tookOver == 0 {
		t.Fatalf("after 30s: deposed relay stopped %v, standby took over %v", stopped, tookOver)
	}
	t.Logf("lock session killed: the deposed relay stopped after %s, a new term published after %s (lock_check %s, lock_retry %s)",
		stopped.Round(time.Millisecond), tookOver.Round(time.Millisecond), time.Second, time.Second)
	if stopped > 5*time.Second || tookOver > 10*time.Second {
		t.Errorf("takeover too slow: stopped after %s, took over after %s", stopped, tookOver)
	}
	c := e.collector()
	c.waitFor(e.ctx, all, 30*time.Second)
	c.poll(e.ctx, 200*time.Millisecond)
	c.checkStreams(e)
	c.checkProducers()
}
