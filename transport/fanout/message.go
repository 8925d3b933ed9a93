package fanout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
)

// Kind is what a Message carries.
type Kind string

// The kinds of messages.
const (
	// KindData is a committed message: the fields of a WebSocket data frame.
	KindData Kind = "data"
	// KindInfo is an ephemeral note about a topic (typing "kp", "read", "recv"); never stored.
	KindInfo Kind = "info"
	// KindPres is a presence change in a topic ("on", "off") of user From.
	KindPres Kind = "pres"
	// KindControl is a committed change of a topic's members or settings (a removal, a role, a
	// block): every session of the topic hears What about user Src, and the subscriptions Drop
	// names end on every node that receives it. Nodes that do not know the kind ignore it.
	KindControl Kind = "control"
	// KindChange is a committed change of message Seq by user From: What is "recall" or "edit";
	// an edit carries the content Version after it and the new Content. Nodes that do not know
	// the kind ignore it.
	KindChange Kind = "change"
)

// Drop names the subscriptions a KindControl message ends.
type Drop string

// The scopes of a KindControl message.
const (
	// DropNone ends no subscription: the message is a notice.
	DropNone Drop = ""
	// DropUser ends the subscriptions of every session of user Src to the topic.
	DropUser Drop = "user"
	// DropAll ends every subscription to the topic.
	DropAll Drop = "all"
)

// Message is what travels to a topic's online sessions. Receivers must not modify it: one value
// is shared by every local session.
type Message struct {
	Kind   Kind            `json:"kind"`
	Tenant domain.TenantID `json:"tenant"`
	Topic  domain.Topic    `json:"topic"`
	From   domain.UserID   `json:"from,omitempty"` // 0 only in a control message of an unknown actor
	// Data fields.
	Seq       int64          `json:"seq,omitempty,string"`
	MessageID string         `json:"message_id,omitempty"`
	MsgType   domain.MsgType `json:"msg_type,omitempty"`
	Head      *domain.Head   `json:"head,omitempty"`
	TS        time.Time      `json:"ts"`
	// Content is the message content exactly as the sender sent it (bytes, not re-encoded).
	Content json.RawMessage `json:"-"`
	// What is the note ("kp", "read", "recv"), presence change ("on", "off") or control change
	// ("removed", "role", ...).
	What string `json:"what,omitempty"`
	// Src is the user a KindControl change concerns (the removed member, the blocked peer); 0
	// when it concerns the topic itself. From is who made the change, 0 when unknown.
	Src domain.UserID `json:"src,omitempty"`
	// Drop is whose subscriptions a KindControl message ends.
	Drop Drop `json:"drop,omitempty"`
	// Version is the content version after a KindChange edit.
	Version int64 `json:"version,omitempty,string"`
	// SkipSession, when set, names the session the message came from; it does not receive it.
	SkipSession string `json:"skip_session,omitempty"`
}

// encode writes m as a JSON header, a newline, and the content bytes verbatim. JSON encoding
// would compact and escape the content; this keeps it byte for byte.
func encode(m *Message) ([]byte, error) {
	h, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode fanout message: %w", err)
	}
	out := make([]byte, 0, len(h)+1+len(m.Content))
	out = append(out, h...)
	out = append(out, '\n')
	return append(out, m.Content...), nil
}

// decode reverses encode.
func decode(b []byte) (*Message, error) {
	h, content, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		return nil, errors.New("decode fanout message: no header separator")
	}
	m := new(Message)
	if err := json.Unmarshal(h, m); err != nil {
		return nil, fmt.Errorf("decode fanout message: %w", err)
	}
	if m.Tenant.IsZero() || m.Topic.IsZero() {
		return nil, errors.New("decode fanout message: tenant and topic are required")
	}
	if len(content) > 0 {
		m.Content = content
	}
	return m, nil
}
