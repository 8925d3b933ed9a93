package readmodels

import (
	"encoding/json"
	"time"

	"github.com/imledger/imledger/domain"
)

// Message statuses as stored in the status column and in hot snapshots.
const (
	StatusNormal   = "normal"
	StatusRecalled = "recalled"
	// StatusSkipped marks a seq-skip marker's row: the seq is a final hole, never a message.
	StatusSkipped = "skipped"
	// StatusBlocked marks a message whose content the read model's store refused (seed 000
	// §6.2: "blocked", 拦截): content that the domain refuses today but an event written before
	// that, or by another build, still carries. The message keeps its place in the conversation
	// and its metadata, but never carries content or head; an edit the store accepts makes it
	// normal again, a recall recalls it.
	StatusBlocked = "blocked"
)

// Message is one message as a reader sees it. A recalled message keeps its place in the
// conversation (status "recalled") but never carries content or head; so does a message whose
// content the store refused (status "blocked"). Seqs and 64-bit ids are
// JSON strings. Times are UTC with millisecond precision, the precision MySQL stores.
type Message struct {
	Topic       string          `json:"topic"`
	Seq         int64           `json:"seq,string"`
	From        domain.UserID   `json:"from"`
	To          domain.UserID   `json:"to,omitempty"` // 1:1 topics: the receiver
	ClientMsgID string          `json:"client_msg_id,omitempty"`
	MsgType     domain.MsgType  `json:"msg_type"`
	Status      string          `json:"status"`
	Content     json.RawMessage `json:"content"`
	Head        *domain.Head    `json:"head,omitempty"`
	Version     int64           `json:"version"` // content version: 1 as sent, 2 after the first edit (a recall adds 1)
	SentAt      time.Time       `json:"sent_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	RecalledAt  *time.Time      `json:"recalled_at,omitempty"`
	RecalledBy  domain.UserID   `json:"recalled_by,omitempty"`
}

// Recalled reports whether the message was recalled.
func (m Message) Recalled() bool { return m.Status == StatusRecalled }

// Blocked reports whether the store refused the message's content (StatusBlocked).
func (m Message) Blocked() bool { return m.Status == StatusBlocked }

// Redact clears what a recalled or blocked message must never show, whatever a store returned.
func (m *Message) Redact() {
	if m.Recalled() || m.Blocked() {
		m.Content = nil
		m.Head = nil
	}
}

// Millis truncates t to the millisecond in UTC, the precision every read model stores, so a
// message read from MySQL and from Redis compare equal.
func Millis(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// HeadOf returns h, or nil when h carries nothing, which is how the stores keep an empty head.
func HeadOf(h domain.Head) *domain.Head {
	if len(h.Mentions) == 0 && !h.MentionAll && h.ReplySeq == 0 && h.RootSeq == 0 {
		return nil
	}
	return &h
}
