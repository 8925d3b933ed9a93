package projections

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/imledger/imledger/domain"
)

// Metadata keys the unmarshaler adds to every watermill message besides the Kafka headers
// (event_id, event_type, tenant_id, stream_version, traceparent, …).
const (
	MetaKafkaKey       = "kafka_key"
	MetaKafkaTopic     = "kafka_topic"
	MetaKafkaPartition = "kafka_partition"
	MetaKafkaOffset    = "kafka_offset"
)

// metaPoisonReason is set by the handler on a message it gives up on, read by the dead-letter
// sink. Not a Kafka header.
const metaPoisonReason = "imledger_poison_reason"

// envelopeUnmarshaler turns a Kafka record into a watermill message without decoding it: the
// payload is the record value, the metadata holds every header plus the record's key, topic,
// partition and offset. It never fails, because a failing unmarshaler stops the consumer group
// session in a loop; a value that is not an envelope is dead-lettered by the handler instead.
type envelopeUnmarshaler struct{}

// Unmarshal implements kafka.Unmarshaler.
func (envelopeUnmarshaler) Unmarshal(m *sarama.ConsumerMessage) (*message.Message, error) {
	meta := make(message.Metadata, len(m.Headers)+4)
	for _, h := range m.Headers {
		if h != nil {
			meta.Set(string(h.Key), string(h.Value))
		}
	}
	meta.Set(MetaKafkaKey, string(m.Key))
	meta.Set(MetaKafkaTopic, m.Topic)
	meta.Set(MetaKafkaPartition, strconv.FormatInt(int64(m.Partition), 10))
	meta.Set(MetaKafkaOffset, strconv.FormatInt(m.Offset, 10))
	id := meta.Get("event_id")
	if id == "" {
		id = m.Topic + "/" + strconv.FormatInt(int64(m.Partition), 10) + "/" + strconv.FormatInt(m.Offset, 10)
	}
	msg := message.NewMessage(id, m.Value)
	msg.Metadata = meta
	return msg, nil
}

// source is where a consumed event came from.
type source struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       string
}

func sourceOf(msg *message.Message) source {
	p, _ := strconv.ParseInt(msg.Metadata.Get(MetaKafkaPartition), 10, 32)
	o, err := strconv.ParseInt(msg.Metadata.Get(MetaKafkaOffset), 10, 64)
	if err != nil {
		o = -1
	}
	return source{Topic: msg.Metadata.Get(MetaKafkaTopic), Partition: int32(p), Offset: o, Key: msg.Metadata.Get(MetaKafkaKey)}
}

// decodeEnvelope parses a record value as a domain.Envelope, upcast to the current version of
// its event type (the relay publishes events as stored), and checks the fields every projection
// relies on. Its errors are permanent: the same bytes never decode later.
func decodeEnvelope(payload []byte) (domain.Envelope, error) {
	env, err := domain.DecodeEnvelope(payload)
	if err != nil {
		return env, permanent(ReasonBadEnvelope, fmt.Errorf("decode envelope: %w", err))
	}
	env, err = domain.Upcast(env)
	if err != nil {
		return env, permanent(ReasonBadEvent, err)
	}
	switch {
	case env.TenantID.IsZero():
		return env, permanent(ReasonBadEnvelope, fmt.Errorf("decode envelope %s: no tenant_id", env.EventID))
	case env.StreamID == "":
		return env, permanent(ReasonBadEnvelope, fmt.Errorf("decode envelope %s: no stream_id", env.EventID))
	case env.EventType == "":
		return env, permanent(ReasonBadEnvelope, fmt.Errorf("decode envelope %s: no event_type", env.EventID))
	}
	return env, nil
}

// conversationOf returns the tenant and conversation key of a record: from the envelope when it
// decodes, else from the Kafka key "tenant:conversation" or the tenant_id header.
func conversationOf(msg *message.Message, env *domain.Envelope) (tenant, conv string) {
	if env != nil && !env.TenantID.IsZero() {
		return env.TenantID.String(), domain.ConversationKey(env.StreamID)
	}
	key := msg.Metadata.Get(MetaKafkaKey)
	if t, c, ok := strings.Cut(key, ":"); ok {
		return t, c
	}
	return msg.Metadata.Get("tenant_id"), key
}
