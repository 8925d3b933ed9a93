package kafkabroker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/imledger/imledger/internal/kafkabroker"
	"github.com/imledger/imledger/internal/testenv"
)

// retentionBroker starts a broker whose retention runs only when the test applies it.
func retentionBroker(t *testing.T, cfg kafkabroker.Config) (*kafkabroker.Broker, *kgo.Client) {
	t.Helper()
	cfg.Addr, cfg.DataDir, cfg.RetentionCheck, cfg.Partitions = "127.0.0.1:0", t.TempDir(), time.Hour, 1
	b, err := kafkabroker.Start(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return b, cl
}

func createTopic(t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	if err := newTopic(t.Context(), cl, topic, 1); err != nil {
		t.Fatal(err)
	}
}

// produceN produces n records to partition 0 of topic, one batch each.
func produceN(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	for range n {
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Partition: 0, Value: make([]byte, 100)}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

// commit commits offset for group on partition 0 of topic, as a consumer outside a group
// generation does.
func commit(t *testing.T, cl *kgo.Client, group, topic string, offset int64) {
	t.Helper()
	if err := testenv.CommitOffset(t.Context(), cl, group, topic, 0, offset); err != nil {
		t.Fatal(err)
	}
}

// logStart returns the first offset partition 0 of topic still holds.
func logStart(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -2 // the earliest offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("list offsets of %s: %v", topic, err)
	}
	return p.Offset
}

func applyRetention(t *testing.T, b *kafkabroker.Broker) kafkabroker.RetentionStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := b.ApplyRetention(ctx)
	if err != nil {
		t.Fatalf("ApplyRetention: %v", err)
	}
	return st
}

// Retention by size deletes what every consumer group of a topic has committed past, never what
// one of them has not read yet; a topic nobody consumes is trimmed by size alone.
func TestRetentionNeverDropsWhatAGroupHasNotCommitted(t *testing.T) {
	t.Parallel()
	b, cl := retentionBroker(t, kafkabroker.Config{RetentionBytes: 1, RetentionTime: -1})
	createTopic(t, cl, "consumed")
	createTopic(t, cl, "unread")
	produceN(t, cl, "consumed", 100)
	produceN(t, cl, "unread", 50)
	commit(t, cl, "fast", "consumed", 90)
	commit(t, cl, "slow", "consumed", 40)

	st := applyRetention(t, b)
	if got := logStart(t, cl, "consumed"); got != 40 {
		t.Errorf("consumed: log starts at %d, want 40: the slow group committed up to 40", got)
	}
	if got := logStart(t, cl, "unread"); got != 50 {
		t.Errorf("unread: log starts at %d, want 50: no group consumes it and it is past retention", got)
	}
	if st.Deleted != 40+50 || st.Held != 60 {
		t.Errorf("stats = %+v, want 90 deleted and 60 held", st)
	}

	commit(t, cl, "slow", "consumed", 100)
	applyRetention(t, b)
	if got := logStart(t, cl, "consumed"); got != 90 {
		t.Errorf("consumed: log starts at %d, want 90: the fast group committed up to 90", got)
	}

	// What was kept is still there to read.
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"consumed": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var offsets []int64
	for len(offsets) < 10 && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { offsets = append(offsets, r.Offset) })
	}
	if len(offsets) != 10 || offsets[0] != 90 || offsets[9] != 99 {
		t.Errorf("read offsets %v, want 90..99", offsets)
	}
}

// A partition that a group consumes but has not committed on yet is held whole.
func TestRetentionHoldsAPartitionAGroupHasNotCommittedOn(t *testing.T) {
	t.Parallel()
	b, cl := retentionBroker(t, kafkabroker.Config{RetentionBytes: 1, RetentionTime: -1})
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "two", 2, 1
	req.Topics = append(req.Topics, rt)
	if _, err := req.RequestWith(t.Context(), cl); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "two", 20) // all on partition 0
	for range 20 {
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: "two", Partition: 1, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	commit(t, cl, "g", "two", 20) // partition 0 only
	applyRetention(t, b)
	if got := logStart(t, cl, "two"); got != 20 {
		t.Errorf("partition 0 starts at %d, want 20", got)
	}
	r := kmsg.NewPtrListOffsetsRequest()
	r.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "two"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = 1, -2
	lt.Partitions = append(lt.Partitions, lp)
	r.Topics = append(r.Topics, lt)
	resp, err := r.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0].Partitions[0].Offset; got != 0 {
		t.Errorf("partition 1 starts at %d, want 0: the group has committed nothing there", got)
	}
}

// Retention by age deletes records once they are older than RetentionTime, not before.
func TestRetentionByAge(t *testing.T) {
	t.Parallel()
	b, cl := retentionBroker(t, kafkabroker.Config{RetentionBytes: -1, RetentionTime: 300 * time.Millisecond})
	createTopic(t, cl, "aging")
	produceN(t, cl, "aging", 10)
	applyRetention(t, b)
	if got := logStart(t, cl, "aging"); got != 0 {
		t.Fatalf("log starts at %d right after producing, want 0", got)
	}
	time.Sleep(400 * time.Millisecond)
	produceN(t, cl, "aging", 5)
	applyRetention(t, b)
	if got := logStart(t, cl, "aging"); got != 10 {
		t.Errorf("log starts at %d, want 10: only the first ten records are older than the retention", got)
	}
}
