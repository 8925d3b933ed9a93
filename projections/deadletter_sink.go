package projections

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/imledger/imledger/domain"
)

// Headers added to a record on im.dead.letter, besides the original record's headers.
const (
	HeaderReason            = "reason"
	HeaderError             = "error"
	HeaderConsumerGroup     = "consumer_group"
	HeaderOriginalTopic     = "original_topic"
	HeaderOriginalPartition = "original_partition"
	HeaderOriginalOffset    = "original_offset"
)

// deadLetterSink is the publisher behind watermill's PoisonQueue middleware for one consumer
// group. It publishes the poisoned record to the dead-letter topic (same value and key, the
// original headers plus reason, error, consumer group and original coordinates), then records
// an open dead letter in Postgres, which parks the rest of the conversation. If either step
// fails the handler fails and the record is redelivered, so a dead letter may appear twice on
// Kafka but never zero times.
type deadLetterSink struct {
	group    string
	producer sarama.SyncProducer
	parking  parkingStore
	metrics  *Metrics
	log      *slog.Logger
	// settled is told about each record once it is dead-lettered; may be nil.
	settled func(msg *message.Message, tenant, conv string)
	// opening is told before a dead letter is recorded and again once it is; may be nil.
	opening func()
}

var _ message.Publisher = (*deadLetterSink)(nil)

// internalMeta are metadata keys that are not Kafka headers of the original record.
var internalMeta = map[string]bool{
	MetaKafkaKey: true, MetaKafkaTopic: true, MetaKafkaPartition: true, MetaKafkaOffset: true,
	metaPoisonReason: true, middleware.ReasonForPoisonedKey: true, middleware.PoisonedTopicKey: true,
	middleware.PoisonedHandlerKey: true, middleware.PoisonedSubscriberKey: true,
}

// Publish implements message.Publisher for the PoisonQueue middleware.
func (s *deadLetterSink) Publish(topic string, msgs ...*message.Message) error {
	for _, msg := range msgs {
		if err := s.publish(topic, msg); err != nil {
			return err
		}
	}
	return nil
}

func (s *deadLetterSink) publish(topic string, msg *message.Message) error {
	src := sourceOf(msg)
	reason := msg.Metadata.Get(metaPoisonReason)
	if reason == "" {
		reason = ReasonRetriesExhausted
	}
	errText := msg.Metadata.Get(middleware.ReasonForPoisonedKey)
	var envp *domain.Envelope
	if env, err := decodeEnvelope(msg.Payload); err == nil {
		envp = &env
	}
	tenant, conv := conversationOf(msg, envp)

	headers := make([]sarama.RecordHeader, 0, len(msg.Metadata)+6)
	for k, v := range msg.Metadata {
		if !internalMeta[k] {
			headers = append(headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
		}
	}
	for _, h := range [][2]string{{HeaderReason, reason}, {HeaderError, errText}, {HeaderConsumerGroup, s.group},
		{HeaderOriginalTopic, src.Topic}, {HeaderOriginalPartition, strconv.FormatInt(int64(src.Partition), 10)},
		{HeaderOriginalOffset, strconv.FormatInt(src.Offset, 10)}} {
		headers = append(headers, sarama.RecordHeader{Key: []byte(h[0]), Value: []byte(h[1])})
	}
	rec := &sarama.ProducerMessage{Topic: topic, Value: sarama.ByteEncoder(msg.Payload), Headers: headers}
	if src.Key != "" {
		rec.Key = sarama.StringEncoder(src.Key)
	}
	if _, _, err := s.producer.SendMessage(rec); err != nil {
		return retryable("publish dead letter", err)
	}

	eventID := msg.Metadata.Get("event_id")
	eventType := msg.Metadata.Get("event_type")
	if envp != nil {
		eventID, eventType = envp.EventID.String(), string(envp.EventType)
	}
	if eventID == "" {
		eventID = msg.UUID
	}
	if s.opening != nil {
		s.opening()
	}
	id, created, err := s.parking.recordDeadLetter(msg.Context(), DeadLetter{
		ConsumerGroup: s.group, TenantID: tenant, ConversationKey: conv, EventID: eventID, EventType: eventType,
		Reason: reason, Error: truncate(errText, 4000), Topic: src.Topic, Partition: src.Partition, Offset: src.Offset,
		Key: src.Key, Payload: msg.Payload,
	})
	if s.opening != nil {
		// Again once the row is committed: a group-wide lookup that ran while it was being
		// written may have missed it, and must not be trusted.
		s.opening()
	}
	if err != nil {
		return err
	}
	if s.settled != nil {
		s.settled(msg, tenant, conv)
	}
	if created {
		s.metrics.deadLetters.WithLabelValues(s.group, reason).Inc()
		s.log.Error("event dead-lettered; its conversation is parked", "dead_letter_id", id, "tenant_id", tenant,
			"conversation", conv, "event_id", eventID, "event_type", eventType, "reason", reason, "err", errText)
	}
	return nil
}

// Close implements message.Publisher. The producer belongs to the Projector.
func (s *deadLetterSink) Close() error { return nil }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + fmt.Sprintf("… (%d bytes)", len(s))
}
