package domain

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"time"
)

// Category groups event types by the Kafka topic they are published to (DESIGN §4). The relay
// maps a category to a configured topic name.
type Category string

// The event categories.
const (
	CategoryGroupMessage  Category = "group_message"  // im.group.message.persist
	CategoryDirectMessage Category = "direct_message" // im.message.persist
	CategoryBusiness      Category = "business"       // im.business.event
	CategorySession       Category = "session"        // im.session.event
	CategoryAudit         Category = "audit"          // im.audit.event
)

// EventInfo describes a registered event type.
type EventInfo struct {
	Type          EventType
	SchemaVersion int      // the envelope "version" field
	Category      Category // decides the Kafka topic
	BizType       string   // the envelope "biz_type" field
	Payload       func() any
}

var (
	registryMu sync.RWMutex
	registry   = map[EventType]EventInfo{}
)

// RegisterEventType adds an event type to the registry. Registering a name twice panics: event
// names are a wire contract and must be unique.
func RegisterEventType(info EventInfo) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[info.Type]; dup {
		panic("domain: event type registered twice: " + string(info.Type))
	}
	registry[info.Type] = info
}

// LookupEventType returns the registration of t.
func LookupEventType(t EventType) (EventInfo, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	info, ok := registry[t]
	return info, ok
}

// EventTypes lists every registered event type, sorted by name.
func EventTypes() []EventInfo {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]EventInfo, 0, len(registry))
	for _, i := range registry {
		out = append(out, i)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// ConversationKey returns the ordering key of a stream: the part of the stream id before the first
// '/'. A conversation's message stream is named by its topic ("grp7"); streams that modify its
// messages are "<topic>/<suffix>", so every event of one conversation shares the key and stays in
// order on one Kafka partition.
func ConversationKey(streamID string) string {
	if i := strings.IndexByte(streamID, '/'); i >= 0 {
		return streamID[:i]
	}
	return streamID
}

// Message event types.
const (
	EventGroupMessageSent  EventType = "message.group.sent.v1"
	EventDirectMessageSent EventType = "message.direct.sent.v1"
)

// MessageSent is the payload of message.group.sent.v1 and message.direct.sent.v1. The event is
// appended to the conversation stream (stream id = topic) at stream_version = Seq.
type MessageSent struct {
	MessageID   string          `json:"message_id"`
	Topic       string          `json:"topic"`
	GroupID     int64           `json:"group_id,omitempty,string"` // group topics
	To          UserID          `json:"to,omitempty"`              // 1:1 topics: the peer
	Seq         int64           `json:"seq,string"`
	From        UserID          `json:"from"`
	ClientMsgID string          `json:"client_msg_id"`
	MsgType     MsgType         `json:"msg_type"`
	Content     json.RawMessage `json:"content"`
	Head        Head            `json:"head"`
	SentAt      time.Time       `json:"sent_at"`
}

func init() {
	RegisterEventType(EventInfo{Type: EventGroupMessageSent, SchemaVersion: 1, Category: CategoryGroupMessage,
		BizType: "group_message", Payload: func() any { return &MessageSent{} }})
	RegisterEventType(EventInfo{Type: EventDirectMessageSent, SchemaVersion: 1, Category: CategoryDirectMessage,
		BizType: "direct_message", Payload: func() any { return &MessageSent{} }})
}

// SentEventType returns the sent event type for a topic kind.
func SentEventType(k TopicKind) EventType {
	if k == TopicGroup {
		return EventGroupMessageSent
	}
	return EventDirectMessageSent
}
