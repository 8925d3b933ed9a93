package main

import (
	"context"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/commands/admin"
	"github.com/imledger/imledger/internal/kafka"
)

// startAdmin starts the admin command consumer unless admin.run is false: a sarama consumer
// group of im.admin.command in the admin consumer group, results and dead letters produced with
// the node's producer (a batch of results in one flush), commands run through the node's
// handlers.
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
	name := n.cfg.Admin.ConsumerGroup
	if name == "" {
		name = admin.DefaultConsumerGroup // the group the consumer deduplicates in
	}
	// From the oldest record, so a command produced before the first consumer joined still runs;
	// the group's errors are returned, for the consumer to log.
	group, err := kafka.NewConsumerGroup(n.cfg.Kafka.Config, name, true)
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	cfg, err := n.cfg.AdminConsumer()
	if err != nil {
		return nil, err
	}
	// The configuration points kafka.brokers at the embedded broker once it runs: whether this
	// node runs it is what allows unsigned commands.
	cfg.AllowUnsigned = n.cfg.Admin.AllowUnsigned && n.broker != nil
	n.warnAdminTrust(cfg)
	cfg.ResultTopic = n.cfg.Kafka.Topic(kafka.TopicAdminCommandResult)
	cfg.DeadLetterTopic = n.cfg.Kafka.Topic(kafka.TopicDeadLetter)
	cfg.MaxResultBytes = n.cfg.Kafka.MaxMessageBytes
	return admin.New(cfg, admin.Deps{
		Pool: n.pool, Group: group, CommandTopic: n.cfg.Kafka.Topic(kafka.TopicAdminCommand),
		Publisher: saramaPublisher{n.producer}, Owner: n.cfg.NodeID,
		Logger: n.log.With("component", "admin"), Registerer: n.reg,
		Handlers: admin.Handlers{
			Tenants: n.registry, Lookup: n.tenants, Accounts: n.governance, Groups: n.groups, GroupStates: n.loader,
			Messages: n.ops, Sender: n.send, Broadcaster: n.notifier, Events: n.store,
			MaxContentBytes: n.cfg.Send.MaxContentBytes,
		},
	})
}

// warnAdminTrust logs at start what the admin consumer accepts without proof or will refuse for
// want of a key.
func (n *node) warnAdminTrust(cfg admin.Config) {
	log := n.log.With("component", "admin")
	switch {
	case cfg.AllowUnsigned:
		log.Warn("unsigned admin commands and plain-text secret fields are accepted (embedded broker, admin.allow_unsigned): " +
			"whoever can produce to im.admin.command acts as any administrator; with kafka.brokers set they are refused")
	case len(cfg.ProducerKeys) == 0:
		log.Warn("admin.producer_keys is empty: every admin command will be refused (signature_required or unknown_key)")
	}
	if len(cfg.SecretKeys) == 0 && !cfg.AllowUnsigned {
		log.Warn("admin.command_secret_keys is empty: admin commands with secret fields (user.reset_password) will be refused")
	}
}

// saramaPublisher produces records with a synchronous producer (admin.BatchPublisher).
type saramaPublisher struct{ p sarama.SyncProducer }

var _ admin.BatchPublisher = saramaPublisher{}

// PublishBatch implements admin.BatchPublisher: one SendMessages; when some records failed, an
// *admin.PublishBatchError names them, so only those are produced again.
func (s saramaPublisher) PublishBatch(_ context.Context, msgs []admin.OutMessage) error {
	pm := make([]*sarama.ProducerMessage, len(msgs))
	for i, m := range msgs {
		pm[i] = producerMessage(m.Topic, m.Key, m.Value, m.Headers)
	}
	if err := s.p.SendMessages(pm); err != nil {
		return admin.SaramaBatchError(pm, err)
	}
	return nil
}

func producerMessage(topic, key string, value []byte, headers map[string]string) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Topic: topic, Value: sarama.ByteEncoder(value)}
	if key != "" {
		m.Key = sarama.StringEncoder(key)
	}
	for k, v := range headers {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
	}
	return m
}

// Publish implements admin.Publisher.
func (s saramaPublisher) Publish(_ context.Context, topic, key string, value []byte, headers map[string]string) error {
	_, _, err := s.p.SendMessage(producerMessage(topic, key, value, headers))
	return err
}
