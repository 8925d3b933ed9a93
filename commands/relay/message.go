package relay

import (
	"fmt"
	"strconv"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// Kafka record headers set on every published event.
const (
	HeaderEventID       = "event_id"
	HeaderEventType     = "event_type"
	HeaderTenantID      = "tenant_id"
	HeaderStreamVersion = "stream_version"
	HeaderTraceparent   = "traceparent" // only when the envelope's trace_id is a W3C traceparent
)

// Key returns the Kafka key of an event: tenant id, ':' and the stream's conversation key, so all
// events of one conversation land on one partition in order.
func Key(env domain.Envelope) string {
	return env.TenantID.String() + ":" + domain.ConversationKey(env.StreamID)
}

// outMsg is one event ready to publish; a fresh kgo.Record is made from it for every attempt,
// because the producer sets partition, offset and timestamps in the records it is given.
type outMsg struct {
	topic   string
	key     []byte
	value   []byte
	headers []kgo.RecordHeader
}

func (m outMsg) record() *kgo.Record {
	return &kgo.Record{Topic: m.topic, Key: m.key, Value: m.value, Headers: m.headers}
}

// producerMessage is the record as a Sarama message, for NewMessage.
func (m outMsg) producerMessage() *sarama.ProducerMessage {
	headers := make([]sarama.RecordHeader, len(m.headers))
	for i, h := range m.headers {
		headers[i] = sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value}
	}
	return &sarama.ProducerMessage{Topic: m.topic, Key: sarama.ByteEncoder(m.key), Value: sarama.ByteEncoder(m.value), Headers: headers}
}

// errUnknownType marks an event whose type is not in this build's registry.
type errUnknownType struct {
	eventType domain.EventType
	cursor    eventstore.Cursor
}

func (e *errUnknownType) Error() string {
	return fmt.Sprintf("relay: event type %q at (tx %d, position %d) is not registered in this build", e.eventType, e.cursor.TxID, e.cursor.Position)
}

// encode turns records into messages, stopping before the first record whose event type is not
// registered; it returns the messages of the records before it and an *errUnknownType.
func (r *Relay) encode(recs []eventstore.Record) ([]outMsg, error) {
	out := make([]outMsg, 0, len(recs))
	for _, rec := range recs {
		env := rec.Envelope
		info, ok := domain.LookupEventType(env.EventType)
		var topic string
		if ok {
			topic, ok = r.topics.CategoryTopic(string(info.Category))
		}
		if !ok {
			return out, &errUnknownType{eventType: env.EventType, cursor: rec.Cursor}
		}
		env.Position = rec.Cursor.Position
		m, err := newOutMsg(env, topic)
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, nil
}

// NewMessage returns the Kafka record of env on topic exactly as the relay publishes it: the
// envelope JSON as stored (no upcasting) as the value, Key(env) as the key and the headers
// event_id, event_type, tenant_id, stream_version and, for a W3C trace id, traceparent. It fails
// only for a payload that is not JSON.
func NewMessage(env domain.Envelope, topic string) (*sarama.ProducerMessage, error) {
	m, err := newOutMsg(env, topic)
	if err != nil {
		return nil, err
	}
	return m.producerMessage(), nil
}

func newOutMsg(env domain.Envelope, topic string) (outMsg, error) {
	value, err := marshalEnvelope(env)
	if err != nil {
		// An envelope read from the store always marshals; this is a broken payload column.
		return outMsg{}, fmt.Errorf("relay: encode event %s: %w", env.EventID, err)
	}
	headers := make([]kgo.RecordHeader, 4, 5)
	headers[0] = kgo.RecordHeader{Key: HeaderEventID, Value: []byte(env.EventID.String())}
	headers[1] = kgo.RecordHeader{Key: HeaderEventType, Value: []byte(env.EventType)}
	headers[2] = kgo.RecordHeader{Key: HeaderTenantID, Value: []byte(env.TenantID.String())}
	headers[3] = kgo.RecordHeader{Key: HeaderStreamVersion, Value: strconv.AppendInt(nil, env.StreamVersion, 10)}
	if IsTraceparent(env.TraceID) {
		headers = append(headers, kgo.RecordHeader{Key: HeaderTraceparent, Value: []byte(env.TraceID)})
	}
	return outMsg{topic: topic, key: []byte(Key(env)), value: value, headers: headers}, nil
}

// marshalEnvelope is json.Marshal(env) without re-validating and compacting the payload, which
// is most of the cost of encoding an event: the payload comes from a jsonb column, so it is valid
// JSON already (domain.Envelope.AppendJSON).
func marshalEnvelope(env domain.Envelope) ([]byte, error) {
	return env.AppendJSON(make([]byte, 0, 320+len(env.Payload))), nil
}

// IsTraceparent reports whether s is a W3C Trace Context traceparent header value in the
// version-00 layout "vv-<32 hex trace id>-<16 hex parent id>-<2 hex flags>", lower-case hex,
// version not ff, trace and parent ids not all zero.
func IsTraceparent(s string) bool {
	if len(s) != 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	if !lowerHex(s[0:2]) || s[0:2] == "ff" || !lowerHex(s[3:35]) || !lowerHex(s[36:52]) || !lowerHex(s[53:55]) {
		return false
	}
	return !allZero(s[3:35]) && !allZero(s[36:52])
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
