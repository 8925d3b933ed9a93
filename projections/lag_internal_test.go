package projections

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
)

// TestLagMeterAsksOncePerLeaderAndKeepsItsConnection measures three groups over two topics of 6
// partitions, none of them committed on two topics' partitions: the lags count from the oldest
// offsets, each measurement asks for the high watermarks and the oldest offsets in one
// ListOffsets request each, and a second measurement reuses the first one's connection (no new
// ApiVersions, metadata or coordinator requests).
func TestLagMeterAsksOncePerLeaderAndKeepsItsConnection(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	asked := map[kmsg.Key]*atomic.Int64{}
	for _, k := range []kmsg.Key{kmsg.ListOffsets, kmsg.ApiVersions, kmsg.Metadata, kmsg.FindCoordinator} {
		n := &atomic.Int64{}
		asked[k] = n
		cluster.ControlKey(int16(k), func(kmsg.Request) (kmsg.Response, error, bool) {
			cluster.KeepControl()
			n.Add(1)
			return nil, nil, false
		})
	}
	counts := func() map[kmsg.Key]int64 {
		out := map[kmsg.Key]int64{}
		for k, n := range asked {
			out[k] = n.Load()
		}
		return out
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kcfg := tkafka.Config{Brokers: cluster.ListenAddrs(), TopicPrefix: "lag.", Partitions: 6}
	if err := tkafka.EnsureTopics(ctx, kcfg); err != nil {
		t.Fatal(err)
	}
	a, b := kcfg.Topic(tkafka.TopicMessagePersist), kcfg.Topic(tkafka.TopicGroupMessagePersist)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kcfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(topic string, partition int32, n int) {
		for range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: partition, Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(a, 0, 5)
	produce(b, 2, 3)
	// g2 has applied 4 of a/0's records; g1 and g3 never committed anything.
	if err := testenv.CommitOffset(ctx, cl, "g2", a, 0, 4); err != nil {
		t.Fatal(err)
	}

	projs := []Projection{
		{ConsumerGroup: "g1", Topics: []string{tkafka.TopicMessagePersist}},
		{ConsumerGroup: "g2", Topics: []string{tkafka.TopicMessagePersist, tkafka.TopicGroupMessagePersist}},
		{ConsumerGroup: "g3", Topics: []string{tkafka.TopicGroupMessagePersist}},
	}
	cfg := Config{Kafka: kcfg}
	cfg.setDefaults()
	m := &lagMeter{cfg: cfg}
	defer m.close()
	want := map[string]int64{"g1": 5, "g2": 1 + 3, "g3": 3}
	var first, second map[kmsg.Key]int64
	for i := range 2 {
		before := counts()
		lags, err := m.measure(ctx, projs)
		if err != nil {
			t.Fatal(err)
		}
		after := counts()
		for k := range after {
			after[k] -= before[k]
		}
		if i == 0 {
			first = after
		} else {
			second = after
		}
		for _, l := range lags {
			if l.Events != want[l.ConsumerGroup] {
				t.Errorf("measurement %d: %s is %d events behind, want %d (%v)", i+1, l.ConsumerGroup, l.Events, want[l.ConsumerGroup], l.Partitions)
			}
		}
	}
	if first[kmsg.ListOffsets] != 2 || second[kmsg.ListOffsets] != 2 {
		t.Errorf("ListOffsets requests per measurement: %d, then %d; want 2 (high watermarks, oldest offsets)",
			first[kmsg.ListOffsets], second[kmsg.ListOffsets])
	}
	if first[kmsg.ApiVersions] == 0 {
		t.Errorf("the first measurement asked for no API versions: the counts are not seen")
	}
	if n := second[kmsg.ApiVersions] + second[kmsg.Metadata] + second[kmsg.FindCoordinator]; n != 0 {
		t.Errorf("the second measurement connected again: %d ApiVersions, %d Metadata, %d FindCoordinator requests, want none",
			second[kmsg.ApiVersions], second[kmsg.Metadata], second[kmsg.FindCoordinator])
	}
}
