package main

import (
	"context"
	"fmt"

	"github.com/IBM/sarama"
	wkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"

	"github.com/imledger/imledger/commands/admin"
	"github.com/imledger/imledger/internal/kafka"
)

// startAdmin starts the admin command consumer unless admin.run is false: a watermill
// subscriber of im.admin.command in the admin consumer group, results and dead letters produced
// with the node's producer, commands run through the node's handlers.
func (n *node) startAdmin(ctx context.Context) error {
	if !n.cfg.Admin.Run {
		return nil
	}
	c, err := n.newAdminConsumer()
	if err != nil {
		return err
	}
	n.aux = append(n.aux, n.spawn(ctx, "admin commands", c.Run))
	return nil
}

// newAdminConsumer builds the consumer over the node's handlers.
func (n *node) newAdminConsumer() (*admin.Consumer, error) {
	sc, err := kafka.NewSaramaConfig(n.cfg.Kafka.Config)
	if err != nil {
		return nil, err
	}
	sc.Consumer.Return.Errors = true
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest // a command produced before the first consumer joined still runs
	sub, err := wkafka.NewSubscriber(wkafka.SubscriberConfig{Brokers: n.cfg.Kafka.Brokers, Unmarshaler: admin.KafkaUnmarshaler{},
		OverwriteSaramaConfig: sc, ConsumerGroup: n.cfg.Admin.ConsumerGroup, NackResendSleep: n.cfg.Admin.Retry.InitialInterval,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("admin: subscriber: %w", err)
	}
	cfg := n.cfg.Admin.Config
	cfg.ResultTopic = n.cfg.Kafka.Topic(kafka.TopicAdminCommandResult)
	cfg.DeadLetterTopic = n.cfg.Kafka.Topic(kafka.TopicDeadLetter)
	return admin.New(cfg, admin.Deps{
		Pool: n.pool, Subscriber: sub, CommandTopic: n.cfg.Kafka.Topic(kafka.TopicAdminCommand),
		Publisher: saramaPublisher{n.producer}, Owner: n.cfg.NodeID,
		Logger: n.log.With("component", "admin"), Registerer: n.reg,
		Handlers: admin.Handlers{
			Tenants: n.registry, Lookup: n.tenants, Accounts: n.governance, Groups: n.groups, GroupStates: n.loader,
			Messages: n.ops, Sender: n.send, Broadcaster: n.notifier, Events: n.store,
			MaxContentBytes: n.cfg.Send.MaxContentBytes,
		},
	})
}

// saramaPublisher produces records with a synchronous producer (admin.Publisher).
type saramaPublisher struct{ p sarama.SyncProducer }

var _ admin.Publisher = saramaPublisher{}

// Publish implements admin.Publisher.
func (s saramaPublisher) Publish(_ context.Context, topic, key string, value []byte, headers map[string]string) error {
	m := &sarama.ProducerMessage{Topic: topic, Value: sarama.ByteEncoder(value)}
	if key != "" {
		m.Key = sarama.StringEncoder(key)
	}
	for k, v := range headers {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
	}
	_, _, err := s.p.SendMessage(m)
	return err
}
