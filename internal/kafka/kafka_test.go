package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
)

func listTopics(t *testing.T, brokers []string) map[string]sarama.TopicDetail {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	topics, err := admin.ListTopics()
	if err != nil {
		t.Fatal(err)
	}
	return topics
}

func TestEnsureTopicsCreatesMissingTopicsOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	brokers := testenv.Kafka(t)
	cfg := kafka.Config{Brokers: brokers, TopicPrefix: testenv.UniqueName("t") + ".", Partitions: 5}

	// One topic exists already with another partition count: it must be left alone.
	admin, err := sarama.NewClusterAdmin(brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	pre := cfg.Topic(kafka.TopicDeadLetter)
	if err := admin.CreateTopic(pre, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	admin.Close()

	for i := range 2 { // the second run must be a no-op, not an error
		if err := kafka.EnsureTopics(ctx, cfg); err != nil {
			t.Fatalf("EnsureTopics run %d: %v", i+1, err)
		}
	}
	topics := listTopics(t, brokers)
	for _, name := range cfg.Topics() {
		d, ok := topics[name]
		if !ok {
			t.Errorf("topic %s was not created", name)
			continue
		}
		want := int32(5)
		if name == pre {
			want = 2
		}
		if d.NumPartitions != want {
			t.Errorf("topic %s has %d partitions, want %d", name, d.NumPartitions, want)
		}
	}
}

func TestEnsureTopicsFailsWithoutBroker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cfg := kafka.Config{Brokers: []string{"127.0.0.1:1"}, DialTimeout: 200 * time.Millisecond}
	if err := kafka.EnsureTopics(ctx, cfg); err == nil {
		t.Fatal("EnsureTopics succeeded without a broker")
	}
}

// The producer must place a key on the partition the Kafka Java client would choose (murmur2),
// which franz-go's StickyKeyPartitioner(nil) also implements.
func TestSyncProducerPartitionsLikeJavaClient(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	brokers := testenv.Kafka(t)
	cfg := kafka.Config{Brokers: brokers, TopicPrefix: testenv.UniqueName("p") + ".", Partitions: 7}
	if err := kafka.EnsureTopics(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	prod, err := kafka.NewSyncProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	topic := cfg.Topic(kafka.TopicGroupMessagePersist)
	const n = 200
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("t%d:grp%d", i%3, i)), Value: sarama.StringEncoder("v")}
	}
	if err := prod.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
	ref := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	for _, m := range msgs {
		key, _ := m.Key.Encode()
		want := int32(ref.Partition(&kgo.Record{Key: key}, 7))
		if m.Partition != want {
			t.Fatalf("key %s went to partition %d, the Java client picks %d", key, m.Partition, want)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := 0
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for got < n {
		fs := cl.PollFetches(rctx)
		if err := rctx.Err(); err != nil {
			t.Fatalf("read back %d of %d records: %v", got, n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			if want := int32(ref.Partition(r, 7)); r.Partition != want {
				t.Errorf("record %s stored in partition %d, want %d", r.Key, r.Partition, want)
			}
		})
	}
}
