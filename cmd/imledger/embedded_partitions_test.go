package main

import (
	"log/slog"
	"testing"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/cmd/imledger/config"
	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/kafkabroker"
	"github.com/imledger/imledger/internal/testenv"
)

// TestEmbeddedBrokerTopicsGetItsPartitionCount: with the embedded broker and no kafka.partitions,
// the node creates its topics with the broker's partition count (12), not a cluster's 64; a
// kafka.partitions that is set still decides.
func TestEmbeddedBrokerTopicsGetItsPartitionCount(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	for _, c := range []struct{ set, want int32 }{{0, kafkabroker.DefaultPartitions}, {3, 3}} {
		cfg := config.Defaults()
		cfg.Kafka.Embedded = kafkabroker.Config{Addr: "127.0.0.1:0", DataDir: kafkabroker.InMemory}
		cfg.Kafka.Partitions = c.set
		n := newNode(cfg, slog.New(slog.DiscardHandler))
		if err := n.startKafkaBroker(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.broker.Close)
		if err := kafka.EnsureTopics(ctx, n.cfg.Kafka.Config); err != nil {
			t.Fatal(err)
		}
		admin, err := sarama.NewClusterAdmin(n.cfg.Kafka.Brokers, sarama.NewConfig())
		if err != nil {
			t.Fatal(err)
		}
		topic := n.cfg.Kafka.Topic(kafka.TopicGroupMessagePersist)
		meta, err := admin.DescribeTopics([]string{topic})
		_ = admin.Close()
		if err != nil || len(meta) != 1 {
			t.Fatalf("describe %s: %v %v", topic, meta, err)
		}
		if got := int32(len(meta[0].Partitions)); got != c.want {
			t.Errorf("kafka.partitions %d: %s has %d partitions, want %d", c.set, topic, got, c.want)
		}
	}
}
