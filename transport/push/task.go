package push

import (
	"encoding/json"
	"strconv"

	"github.com/imledger/imledger/domain"
)

// Task types.
const (
	TypeGroupMessage  = "group_message"
	TypeDirectMessage = "direct_message"
	TypeMention       = "mention"
)

// Task is one record of im.message.push: remind user_id of message seq of topic. It carries
// the four fields of seed 000's push payload and the recipient, never the content. The Kafka key
// is "<tenant>:<user_id>", so a user's tasks share a partition and one worker coalesces them.
type Task struct {
	Type     string          `json:"type"`
	Topic    string          `json:"topic"`
	Seq      int64           `json:"seq,string"`
	TenantID domain.TenantID `json:"tenant_id"`
	UserID   domain.UserID   `json:"user_id"`
}

// Key is the task's Kafka key.
func (t Task) Key() string { return t.TenantID.String() + ":" + t.UserID.String() }

// Marshal encodes the task as its record value.
func (t Task) Marshal() ([]byte, error) { return json.Marshal(t) }

// ParseTask decodes a record value, refusing one that misses a field.
func ParseTask(b []byte) (Task, error) {
	var t Task
	if err := json.Unmarshal(b, &t); err != nil {
		return Task{}, err
	}
	if t.TenantID.IsZero() || t.Topic == "" || t.Seq <= 0 || t.UserID <= 0 || t.Type == "" {
		return Task{}, &domain.ValidationError{Field: "task", Reason: "incomplete", Detail: "type, topic, seq, tenant_id and user_id are required"}
	}
	return t, nil
}

// keys of the push state in Redis; braces keep one topic's keys in one Cluster slot.
type keys struct{ prefix string }

// dedup is im:{t}:push:dedup:{topic}:{seq}:{uid} (seed 000 §5.4).
func (k keys) dedup(t Task) string {
	return k.prefix + t.TenantID.String() + ":push:dedup:{" + t.Topic + "}:" + strconv.FormatInt(t.Seq, 10) + ":" + t.UserID.String()
}

// reminded is a hash uid -> Unix ms of the user's last reminder for the topic.
func (k keys) reminded(tenant domain.TenantID, topic string) string {
	return k.prefix + tenant.String() + ":push:reminded:{" + topic + "}"
}
