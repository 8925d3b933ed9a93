package domain

import (
	"encoding/json"
	"strconv"
	"strings"
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

// Message event types. Every event of a conversation has a group and a direct variant so that it
// travels on the same Kafka topic, under the same key, as the conversation's messages.
const (
	EventGroupMessageSent      EventType = "message.group.sent.v1"
	EventGroupMessageRecalled  EventType = "message.group.recalled.v1"
	EventGroupMessageEdited    EventType = "message.group.edited.v1"
	EventGroupMessageDeleted   EventType = "message.group.deleted_for_user.v1"
	EventGroupReadMarked       EventType = "message.group.read_marked.v1"
	EventDirectMessageSent     EventType = "message.direct.sent.v1"
	EventDirectMessageRecalled EventType = "message.direct.recalled.v1"
	EventDirectMessageEdited   EventType = "message.direct.edited.v1"
	EventDirectMessageDeleted  EventType = "message.direct.deleted_for_user.v1"
	EventDirectReadMarked      EventType = "message.direct.read_marked.v1"
)

// MessageAction names what happened to a message; with a topic kind it selects the event type.
type MessageAction string

// The message actions.
const (
	ActionSent       MessageAction = "sent"
	ActionRecalled   MessageAction = "recalled"
	ActionEdited     MessageAction = "edited"
	ActionDeleted    MessageAction = "deleted_for_user"
	ActionReadMarked MessageAction = "read_marked"
)

// MessageEventType returns the event type of action on a topic of kind k.
func MessageEventType(k TopicKind, a MessageAction) EventType {
	if k == TopicGroup {
		return EventType("message.group." + string(a) + ".v1")
	}
	return EventType("message.direct." + string(a) + ".v1")
}

// SentEventType returns the sent event type for a topic kind.
func SentEventType(k TopicKind) EventType { return MessageEventType(k, ActionSent) }

// Stream ids of a conversation. The message log is the topic itself (stream_version = seq); the
// other streams share the topic as their ConversationKey.

// MessageOpsStreamID is the stream of recalls and edits of the message at seq: versions count the
// operations, so an edit that names a stale version fails with ErrConcurrency.
func MessageOpsStreamID(topic Topic, seq int64) string {
	return topic.String() + "/m/" + strconv.FormatInt(seq, 10)
}

// DeletionsStreamID is the stream of one user's delete-for-me operations in a topic.
func DeletionsStreamID(topic Topic, user UserID) string {
	return topic.String() + "/del/" + user.String()
}

// ReadMarksStreamID is the stream of one user's read and receive marks in a topic.
func ReadMarksStreamID(topic Topic, user UserID) string {
	return topic.String() + "/read/" + user.String()
}

// MessageSent is the payload of message.{group,direct}.sent.v1. The event is appended to the
// conversation stream (stream id = topic) at stream_version = Seq. The content's edit version is 1.
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

// MessageRecalled is the payload of message.{group,direct}.recalled.v1 (stream MessageOpsStreamID).
// After it the message's content is gone from every read model. A sender's recall names the
// sender in By; a recall by moderation has no By and names the administrator in Moderator, with
// the recorded Reason.
type MessageRecalled struct {
	Topic      string    `json:"topic"`
	Seq        int64     `json:"seq,string"`
	MessageID  string    `json:"message_id"`
	By         UserID    `json:"by,omitempty"`
	Moderator  string    `json:"moderator,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	RecalledAt time.Time `json:"recalled_at"`
}

// MessageEdited is the payload of message.{group,direct}.edited.v1 (stream MessageOpsStreamID).
// EditVersion is the content version after the edit: 2 for the first edit.
type MessageEdited struct {
	Topic       string          `json:"topic"`
	Seq         int64           `json:"seq,string"`
	MessageID   string          `json:"message_id"`
	By          UserID          `json:"by"`
	EditVersion int64           `json:"edit_version,string"`
	Content     json.RawMessage `json:"content"`
	EditedAt    time.Time       `json:"edited_at"`
}

// MessageDeletedForUser is the payload of message.{group,direct}.deleted_for_user.v1 (stream
// DeletionsStreamID): the message disappears for User only.
type MessageDeletedForUser struct {
	Topic     string    `json:"topic"`
	Seq       int64     `json:"seq,string"`
	MessageID string    `json:"message_id"`
	User      UserID    `json:"user"`
	DeletedAt time.Time `json:"deleted_at"`
}

// ReadMarked is the payload of message.{group,direct}.read_marked.v1 (stream ReadMarksStreamID).
// Marks only move forward; RecvSeq >= ReadSeq is not required.
type ReadMarked struct {
	Topic   string    `json:"topic"`
	User    UserID    `json:"user"`
	ReadSeq int64     `json:"read_seq,string"`
	RecvSeq int64     `json:"recv_seq,string"`
	At      time.Time `json:"at"`
}
