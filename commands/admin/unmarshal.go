package admin

import (
	"log/slog"
	"strconv"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

// Metadata keys KafkaUnmarshaler adds to every message besides the record's headers.
const (
	MetaKafkaKey       = "kafka_key"
	MetaKafkaPartition = "kafka_partition"
	MetaKafkaOffset    = "kafka_offset"
)

// KafkaUnmarshaler turns an im.admin.command record into a watermill message without decoding it:
// the payload is the record value, the metadata its headers, key, partition and offset. It never
// fails (a failing unmarshaler stops the consumer group session); a value that is not a command
// is rejected by the handler.
type KafkaUnmarshaler struct{}

// Unmarshal implements the watermill-kafka Unmarshaler.
func (KafkaUnmarshaler) Unmarshal(m *sarama.ConsumerMessage) (*message.Message, error) {
	meta := make(message.Metadata, len(m.Headers)+3)
	for _, h := range m.Headers {
		if h != nil {
			meta.Set(string(h.Key), string(h.Value))
		}
	}
	meta.Set(MetaKafkaKey, string(m.Key))
	meta.Set(MetaKafkaPartition, strconv.FormatInt(int64(m.Partition), 10))
	meta.Set(MetaKafkaOffset, strconv.FormatInt(m.Offset, 10))
	msg := message.NewMessage(m.Topic+"/"+strconv.FormatInt(int64(m.Partition), 10)+"/"+strconv.FormatInt(m.Offset, 10), m.Value)
	msg.Metadata = meta
	return msg, nil
}

// watermillLogger adapts slog to watermill's logger; watermill's info is this package's debug.
type watermillLogger struct{ log *slog.Logger }

func (l watermillLogger) attrs(fields watermill.LogFields) []any {
	out := make([]any, 0, 2*len(fields))
	for k, v := range fields {
		out = append(out, k, v)
	}
	return out
}

func (l watermillLogger) Error(msg string, err error, fields watermill.LogFields) {
	l.log.Warn("watermill: "+msg, append(l.attrs(fields), "err", err)...)
}
func (l watermillLogger) Info(msg string, fields watermill.LogFields) {
	l.log.Debug("watermill: "+msg, l.attrs(fields)...)
}
func (l watermillLogger) Debug(msg string, fields watermill.LogFields) {}
func (l watermillLogger) Trace(msg string, fields watermill.LogFields) {}
func (l watermillLogger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return watermillLogger{l.log.With(l.attrs(fields)...)}
}
