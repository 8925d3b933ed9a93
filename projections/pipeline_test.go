package projections_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/projections"
)

// versioned is a read model that keeps, per conversation, the stream versions it applied, in
// order. Like the real stores it applies an event only if it is the conversation's next version
// and skips one it already holds; an event that would leave a gap is an ordering defect and
// fails the test. crashAfter, when set, makes the first call that arrives once that many
// events were applied hang mid-batch until its context ends and then return without applying
// anything, as a process killed inside its read-model transaction would.
type versioned struct {
	t          testing.TB
	mu         sync.Mutex
	applied    map[string][]int64
	total      int
	dups       int
	maxRun     int // most events of one conversation in one call
	crashAfter int
	crashed    chan struct{}
	crashOnce  sync.Once
}

func newVersioned(t testing.TB) *versioned {
	return &versioned{t: t, applied: map[string][]int64{}, crashed: make(chan struct{})}
}

func (v *versioned) Apply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
	v.mu.Lock()
	crash := v.crashAfter > 0 && v.total >= v.crashAfter
	if crash {
		v.crashAfter = 0
	}
	v.mu.Unlock()
	if crash {
		v.crashOnce.Do(func() { close(v.crashed) })
		<-ctx.Done()
		return 0, ctx.Err()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	runs := map[string]int{}
	n := 0
	for _, e := range events {
		k := e.TenantID.String() + ":" + domain.ConversationKey(e.StreamID)
		runs[k]++
		v.maxRun = max(v.maxRun, runs[k])
		list := v.applied[k]
		last := int64(0)
		if len(list) > 0 {
			last = list[len(list)-1]
		}
		switch {
		case e.StreamVersion <= last:
			v.dups++
		case e.StreamVersion == last+1:
			v.applied[k] = append(list, e.StreamVersion)
			v.total++
			n++
		default:
			v.t.Errorf("conversation %s: version %d applied after %d", k, e.StreamVersion, last)
			return 0, fmt.Errorf("gap before version %d", e.StreamVersion)
		}
	}
	return n, nil
}

func (v *versioned) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.total
}

func (v *versioned) conv(k string) []int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]int64(nil), v.applied[k]...)
}

func oneToN(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

// startProjector runs a projector until stop is called; stop returns Run's error.
func startProjector(t *testing.T, h *projtest.Harness, proj projections.Projection) (p *projections.Projector, stop func() error) {
	t.Helper()
	p, err := projections.NewProjector(h.Config(), projections.Deps{Postgres: h.Pool, Logger: projtest.Logger()}, proj)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = errors.New("projector did not stop")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return p, stop
}

// TestPipelineCrashMidBatchAppliesEveryEventOnceInOrder stops the consumer while a batch is
// inside its read-model write, with many records of the same partition in flight, and starts
// it again in the same consumer group: every event ends up applied exactly once, each
// conversation in order, and the hot conversation is written many events per batch.
func TestPipelineCrashMidBatchAppliesEveryEventOnceInOrder(t *testing.T) {
	t.Parallel()
	h := newHarnessPartitions(t, 1) // every conversation in one partition: all in flight together
	tenant := domain.MustTenantID(testenv.UniqueName("t"))
	const hotN, coldN, colds = 1500, 100, 5
	want := map[string]int{}
	var all []domain.Envelope
	for i := 0; i < hotN; i++ {
		all = append(all, projtest.SentEvent(tenant, projtest.GroupTopic(1), int64(i+1), 7, "hot"))
		if i%3 == 0 && i/3 < coldN {
			for g := int64(2); g < 2+colds; g++ {
				all = append(all, projtest.SentEvent(tenant, projtest.GroupTopic(g), int64(i/3+1), 7, "cold"))
			}
		}
	}
	want[tenant.String()+":"+projtest.GroupTopic(1).String()] = hotN
	for g := int64(2); g < 2+colds; g++ {
		want[tenant.String()+":"+projtest.GroupTopic(g).String()] = coldN
	}
	h.Publish(all...)

	v := newVersioned(t)
	v.crashAfter = len(all) / 3
	proj := recorderProjection("test.pipeline.crash.v1", v)
	_, stop := startProjector(t, h, proj)
	select {
	case <-v.crashed:
	case <-time.After(60 * time.Second):
		t.Fatalf("no batch reached the crash point; %d of %d applied", v.count(), len(all))
	}
	if err := stop(); err != nil {
		t.Fatalf("first run: %v", err)
	}
	before := v.count()
	if before >= len(all) {
		t.Fatalf("everything was applied before the crash (%d); the test proves nothing", before)
	}

	p, _ := startProjector(t, h, proj)
	projtest.Eventually(t, 60*time.Second, func() error {
		if n := v.count(); n != len(all) {
			return fmt.Errorf("applied %d of %d (%d before the crash)", n, len(all), before)
		}
		return nil
	})
	for k, n := range want {
		if got := v.conv(k); !reflect.DeepEqual(got, oneToN(n)) {
			t.Errorf("conversation %s: applied versions %v, want 1..%d once each in order", k, got, n)
		}
	}
	v.mu.Lock()
	maxRun, dups := v.maxRun, v.dups
	v.mu.Unlock()
	if maxRun < 20 {
		t.Errorf("at most %d events of one conversation per batch; the pipeline should fill batches from one partition", maxRun)
	}
	projtest.Eventually(t, 20*time.Second, func() error {
		lags, err := p.Lag(projtest.Ctx(t))
		if err != nil {
			return err
		}
		if lags[0].Events != 0 {
			return fmt.Errorf("lag %d events", lags[0].Events)
		}
		return nil
	})
	t.Logf("%d applied before the crash, %d redelivered duplicates skipped, up to %d events of a conversation per batch",
		before, dups, maxRun)
}

// TestPipelinePoisonParksOnlyItsConversation poisons one event in the middle of a conversation
// that shares its partition with others, all in flight together: the conversation's later
// events are parked, its earlier ones applied, and every other conversation of the partition is
// applied completely.
func TestPipelinePoisonParksOnlyItsConversation(t *testing.T) {
	t.Parallel()
	h := newHarnessPartitions(t, 1)
	tenant := domain.MustTenantID(testenv.UniqueName("t"))
	const n = 200
	var all []domain.Envelope
	byConv := map[int64][]domain.Envelope{}
	for seq := int64(1); seq <= n; seq++ {
		for g := int64(1); g <= 3; g++ {
			e := projtest.SentEvent(tenant, projtest.GroupTopic(g), seq, 7, "x")
			all = append(all, e)
			byConv[g] = append(byConv[g], e)
		}
	}
	poison := byConv[1][49].EventID // seq 50 of conversation 1
	var failing atomic.Bool
	failing.Store(true)
	v := newVersioned(t)
	applier := projections.FailOn(v, func(e domain.Envelope) error {
		if failing.Load() && e.EventID == poison {
			return errors.New("simulated bad row")
		}
		return nil
	})
	proj := recorderProjection("test.pipeline.poison.v1", applier)
	h.Publish(all...)
	startProjector(t, h, proj)

	key := func(g int64) string { return tenant.String() + ":" + projtest.GroupTopic(g).String() }
	ops := projections.NewDeadLetters(h.Pool, projections.ParkingConfig{}, projtest.Logger(), proj)
	projtest.Eventually(t, 60*time.Second, func() error {
		if got := len(v.conv(key(2))) + len(v.conv(key(3))); got != 2*n {
			return fmt.Errorf("other conversations applied %d of %d", got, 2*n)
		}
		list, err := ops.ListDeadLetters(projtest.Ctx(t), projections.ListFilter{Status: projections.StatusOpen})
		if err != nil {
			return err
		}
		if len(list) != 1 || list[0].Parked != n-50 {
			return fmt.Errorf("open dead letters %+v, want one with %d parked events", list, n-50)
		}
		return nil
	})
	if got := v.conv(key(1)); !reflect.DeepEqual(got, oneToN(49)) {
		t.Fatalf("poisoned conversation applied %v, want 1..49", got)
	}
	for _, g := range []int64{2, 3} {
		if got := v.conv(key(g)); !reflect.DeepEqual(got, oneToN(n)) {
			t.Errorf("conversation %d applied %v, want 1..%d", g, got, n)
		}
	}
	list, err := ops.ListDeadLetters(projtest.Ctx(t), projections.ListFilter{Status: projections.StatusOpen})
	if err != nil || len(list) != 1 || list[0].EventID != poison.String() {
		t.Fatalf("dead letters %+v, %v; want the poisoned event", list, err)
	}
	failing.Store(false)
	if _, err := ops.ReplayDeadLetter(projtest.Ctx(t), list[0].ID); err != nil {
		t.Fatal(err)
	}
	if got := v.conv(key(1)); !reflect.DeepEqual(got, oneToN(n)) {
		t.Fatalf("poisoned conversation after replay applied %v, want 1..%d", got, n)
	}
}

// newHarnessPartitions is newHarness with topics of the given partition count.
func newHarnessPartitions(t testing.TB, partitions int32) *projtest.Harness {
	t.Helper()
	h := projtest.NewHarness(t)
	h.Kafka.TopicPrefix = testenv.UniqueName("p") + "."
	h.Kafka.Partitions = partitions
	if err := tkafka.EnsureTopics(projtest.Ctx(t), h.Kafka); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestLagIgnoresTransactionMarkers publishes in Kafka transactions, as the relay does: each
// commit leaves a marker record no consumer sees, and a projector that applied everything must
// still show no lag.
func TestLagIgnoresTransactionMarkers(t *testing.T) {
	t.Parallel()
	h := newHarnessPartitions(t, 2)
	tenant := domain.MustTenantID(testenv.UniqueName("t"))
	topic := h.Kafka.Topic(tkafka.TopicGroupMessagePersist)
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.Kafka.Brokers...), kgo.TransactionalID(testenv.UniqueName("tx")))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := projtest.Ctx(t)
	const n = 12
	for txn := 0; txn < 3; txn++ {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n/3; i++ {
			seq := int64(txn*n/3/2 + i/2 + 1)
			e := projtest.SentEvent(tenant, projtest.GroupTopic(int64(1+i%2)), seq, 7, "x")
			value, _ := json.Marshal(e)
			r := &kgo.Record{Topic: topic, Key: []byte(tenant.String() + ":" + domain.ConversationKey(e.StreamID)), Value: value}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	v := newVersioned(t)
	p, _ := h.Run(h.Config(), recorderProjection("test.lag.markers.v1", v))
	projtest.Eventually(t, 30*time.Second, func() error {
		if got := v.count(); got != n {
			return fmt.Errorf("applied %d of %d", got, n)
		}
		return nil
	})
	projtest.Eventually(t, 20*time.Second, func() error {
		lags, err := p.Lag(projtest.Ctx(t))
		if err != nil {
			return err
		}
		if lags[0].Events != 0 {
			return fmt.Errorf("lag %d events %v after everything was applied", lags[0].Events, lags[0].Partitions)
		}
		return nil
	})
}

// TestAProjectionIsOneMemberForAllItsTopics: a projection over two topics joins its consumer
// group once, as one member assigned both topics (one Kafka client and fetch loop), and applies
// the events of both. It used to join once per topic.
func TestAProjectionIsOneMemberForAllItsTopics(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	tenant := domain.MustTenantID(testenv.UniqueName("t"))
	direct, err := domain.DirectTopic(3, 4)
	if err != nil {
		t.Fatal(err)
	}
	h.Publish(projtest.SentEvent(tenant, projtest.GroupTopic(1), 1, 7, "group"), projtest.SentEvent(tenant, direct, 1, 3, "direct"))
	v := newVersioned(t)
	const group = "test.pipeline.members.v1"
	startProjector(t, h, recorderProjection(group, v))
	projtest.Eventually(t, 30*time.Second, func() error {
		if n := v.count(); n != 2 {
			return fmt.Errorf("applied %d of 2", n)
		}
		return nil
	})
	admin, err := sarama.NewClusterAdmin(h.Kafka.Brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	groups, err := admin.DescribeConsumerGroups([]string{group})
	if err != nil || len(groups) != 1 {
		t.Fatalf("describe %s: %v %v", group, groups, err)
	}
	members := groups[0].Members
	if len(members) != 1 {
		t.Fatalf("%d members in the projection's consumer group, want 1", len(members))
	}
	for _, m := range members {
		a, err := m.GetMemberAssignment()
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Topics) != 2 {
			t.Fatalf("the member is assigned %v, want both topics", a.Topics)
		}
	}
}
