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
	for _, name := range cfg.Topics() {
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
