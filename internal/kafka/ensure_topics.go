package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// EnsureTopics creates every topic of TopicNames (with cfg's prefix) that does not exist yet,
// with cfg.Partitions partitions and cfg.ReplicationFactor replicas. It is idempotent: topics
// that exist, or that another process creates concurrently, are left as they are, even when
// their partition count differs. It fails if cfg is invalid, no broker answers, or a topic
// cannot be created; ctx is checked between topics.
func EnsureTopics(ctx context.Context, cfg Config) error {
	return createTopics(ctx, cfg, cfg.Topics())
}

// EnsureTopic creates the topic named name (a full name: no prefix is added) with cfg's partition
// count and replication factor unless it exists, as EnsureTopics does for imledger's own topics.
// Replay topics of `imledger republish` are created with it.
func EnsureTopic(ctx context.Context, cfg Config, name string) error {
	return createTopics(ctx, cfg, []string{name})
}

func createTopics(ctx context.Context, cfg Config, names []string) error {
	sc, err := NewSaramaConfig(cfg)
	if err != nil {
		return err
	}
	cfg.setDefaults()
	admin, err := sarama.NewClusterAdmin(cfg.Brokers, sc)
	if err != nil {
		return fmt.Errorf("kafka: connect cluster admin to %v: %w", cfg.Brokers, err)
	}
	defer admin.Close()
	existing, err := admin.ListTopics()
	if err != nil {
		return fmt.Errorf("kafka: list topics: %w", err)
	}
	detail := &sarama.TopicDetail{NumPartitions: cfg.Partitions, ReplicationFactor: cfg.ReplicationFactor}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kafka: ensure topics: %w", err)
		}
		if _, ok := existing[name]; ok {
			continue
		}
		err := admin.CreateTopic(name, detail, false)
		if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
			return fmt.Errorf("kafka: create topic %s: %w", name, err)
		}
	}
	return nil
}
