package domain

import "time"

// Seq-skip markers (DESIGN §4: an explicit abandoned-seq event). A marker is appended to a
// conversation stream (stream id = topic) AT the seq it gives up, so the events table's unique
// key (tenant_id, stream_id, stream_version) decides between it and a late send of that seq:
// whichever commits first holds the seq, and the other gets a conflict (a send then takes a new
// seq). Once a seq holds a message or a marker it is final, so readers can publish a watermark:
// the highest seq below which every seq is present or final as a hole.

// Event types of seq-skip markers, one per topic kind so that a marker travels on the same Kafka
// topic, under the same key, as the conversation's messages.
const (
	EventGroupSeqSkipped  EventType = "message.group.seq_skipped.v1"
	EventDirectSeqSkipped EventType = "message.direct.seq_skipped.v1"
)

// ActionSeqSkipped is the message action of a seq-skip marker.
const ActionSeqSkipped MessageAction = "seq_skipped"

// Reasons a seq is skipped.
const (
	// SkipAbandoned: the sender's node gave the seq up (its append failed after the seq was
	// allocated).
	SkipAbandoned = "abandoned"
	// SkipGapTimeout: the relay saw a later seq of the conversation committed while this one
	// stayed missing past its deadline (a node died holding it, or its send failed).
	SkipGapTimeout = "gap_timeout"
	// SkipExpired: the seq's message is older than its tenant's retention horizon. Never
	// appended: projections read expired messages so (docs/retention.md), and the hot window
	// does not index such a seq.
	SkipExpired = "expired"
)

// SeqSkipped is the payload of message.{group,direct}.seq_skipped.v1, appended to the
// conversation stream at stream_version = Seq. It carries no message: readers record the seq as
// a final hole and never show it as a message.
type SeqSkipped struct {
	Topic     string    `json:"topic"`
	Seq       int64     `json:"seq,string"`
	Reason    string    `json:"reason"`
	SkippedAt time.Time `json:"skipped_at"`
}

// IsConversationSeqEvent reports whether t is one of the event types that hold a seq of a
// conversation stream: a sent message or a seq-skip marker.
func IsConversationSeqEvent(t EventType) bool {
	switch t {
	case EventGroupMessageSent, EventDirectMessageSent, EventGroupSeqSkipped, EventDirectSeqSkipped:
		return true
	}
	return false
}

// NewSeqSkipped builds the marker envelope that gives up seq of topic, with actor as its
// cause (normally a system actor naming the component).
func NewSeqSkipped(tenant TenantID, topic Topic, seq int64, reason string, actor Actor, at time.Time) (Envelope, error) {
	if topic.IsZero() {
		return Envelope{}, invalid("topic", "required", "")
	}
	at = at.UTC()
	e, err := NewEnvelope(tenant, topic.String(), seq, MessageEventType(topic.Kind(), ActionSeqSkipped), actor,
		SeqSkipped{Topic: topic.String(), Seq: seq, Reason: reason, SkippedAt: at})
	if err != nil {
		return Envelope{}, err
	}
	e.OccurredAt = at
	e.BizID = topic.String()
	return e, nil
}
