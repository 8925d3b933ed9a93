package rest

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/query"
)

// Message is one message as the history and the conversation list answer it. Seqs, user ids and
// the content version are 64-bit numbers and so JSON strings, in the document as on the wire: the
// read model's own type is not answered as it is, because its JSON is also what the Redis hot
// snapshots store.
type Message struct {
	Topic       string          `json:"topic" doc:"The conversation topic"`
	Seq         string          `json:"seq" doc:"The message's seq in its topic (64-bit, as a string)"`
	From        string          `json:"from" doc:"The sender's user id"`
	To          string          `json:"to,omitempty" doc:"1:1 topics: the receiver's user id"`
	ClientMsgID string          `json:"client_msg_id,omitempty" doc:"The sender's client_msg_id"`
	MsgType     string          `json:"msg_type" doc:"text, image, file, audio, video or system"`
	Status      string          `json:"status" enum:"normal,recalled,blocked" doc:"recalled and blocked messages carry neither content nor head"`
	Content     json.RawMessage `json:"content" doc:"The content as sent or last edited; null when recalled or blocked"`
	Head        *MessageHead    `json:"head,omitempty" doc:"Mentions, reply context and files; absent when empty"`
	Version     string          `json:"version" doc:"The content version (64-bit, as a string): \"1\" as sent, one more per edit and for a recall; an edit sends it back"`
	SentAt      time.Time       `json:"sent_at" doc:"When the message was committed (UTC, millisecond precision)"`
	UpdatedAt   time.Time       `json:"updated_at" doc:"When the message last changed"`
	RecalledAt  *time.Time      `json:"recalled_at,omitempty" doc:"Recalled messages: when"`
	RecalledBy  string          `json:"recalled_by,omitempty" doc:"Recalled messages: the user id of who recalled it"`
}

// MessageHead is a message's head as the API answers it.
type MessageHead struct {
	Mentions   []string `json:"mentions,omitempty" doc:"Mentioned user ids"`
	MentionAll bool     `json:"mention_all,omitempty" doc:"The message mentions everyone"`
	ReplySeq   string   `json:"reply_seq,omitempty" doc:"The seq replied to (64-bit, as a string)"`
	RootSeq    string   `json:"root_seq,omitempty" doc:"The seq the thread starts at (64-bit, as a string)"`
	Files      []string `json:"files,omitempty" doc:"Ids of the files the message carries"`
}

// messageOf returns the answer of a read-model message.
func messageOf(m query.Message) Message {
	out := Message{Topic: m.Topic, Seq: itoa(m.Seq), From: m.From.String(), ClientMsgID: m.ClientMsgID,
		MsgType: string(m.MsgType), Status: m.Status, Content: m.Content, Head: headOf(m.Head),
		Version: itoa(m.Version), SentAt: m.SentAt, UpdatedAt: m.UpdatedAt, RecalledAt: m.RecalledAt}
	if m.To != 0 {
		out.To = m.To.String()
	}
	if m.RecalledBy != 0 {
		out.RecalledBy = m.RecalledBy.String()
	}
	return out
}

// messagesOf returns the answers of read-model messages, never nil.
func messagesOf(ms []query.Message) []Message {
	out := make([]Message, len(ms))
	for i, m := range ms {
		out[i] = messageOf(m)
	}
	return out
}

func headOf(h *domain.Head) *MessageHead {
	if h == nil {
		return nil
	}
	out := &MessageHead{MentionAll: h.MentionAll, Files: h.Files}
	if len(h.Mentions) > 0 {
		out.Mentions = make([]string, len(h.Mentions))
		for i, u := range h.Mentions {
			out.Mentions[i] = u.String()
		}
	}
	if h.ReplySeq != 0 {
		out.ReplySeq = strconv.FormatInt(h.ReplySeq, 10)
	}
	if h.RootSeq != 0 {
		out.RootSeq = strconv.FormatInt(h.RootSeq, 10)
	}
	return out
}
