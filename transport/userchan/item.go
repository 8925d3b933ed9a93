package userchan

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/imledger/imledger/domain"
)

// The kinds of items (Item.What) a channel logs. Names are stable: they are the protocol.
const (
	// Group memberships: the member's own items, and the group's owner's and admins' for the
	// requests they decide.
	WhatJoined        = "joined"         // src joined group topic (created it, was approved, accepted an invitation); from who let them in
	WhatInvited       = "invited"        // src was invited by from
	WhatJoinRequested = "join_requested" // src asks to join (the deciders and src hear it)
	WhatJoinRejected  = "join_rejected"  // from rejected src's request (src and the deciders hear it)
	WhatLeft          = "left"           // src left
	WhatRemoved       = "removed"        // from removed src
	WhatUnbanned      = "unbanned"       // from lifted src's ban
	WhatRole          = "role"           // from made src role
	WhatMute          = "mute"           // from muted src
	WhatUnmute        = "unmute"         // from lifted src's mute
	WhatDissolved     = "dissolved"      // from dissolved the group (every member hears it)

	// Relations, heard by both users: from acted, src is the other.
	WhatFriendRequested = "friend_requested"
	WhatFriendAccepted  = "friend_accepted"
	WhatFriendDeclined  = "friend_declined"
	WhatFriendRemoved   = "friend_removed"
	WhatBlocked         = "blocked"
	WhatUnblocked       = "unblocked"

	// WhatConv is a new 1:1 conversation, with its first message, heard by both users.
	WhatConv = "conv"
	// WhatRead is the user's read mark in topic, moved on one of their devices.
	WhatRead = "read"
	// WhatAccount is a change of the user's account: change is banned, unbanned, kicked,
	// tokens_revoked or password_reset, and reason, for a change that ends sessions, the reason
	// those sessions are told.
	WhatAccount = "account"
)

// Message is a message an item carries (a new conversation's first message), with the fields of
// a live data frame.
type Message struct {
	Seq       int64
	From      domain.UserID
	MessageID string
	MsgType   domain.MsgType
	Head      *domain.Head
	SentAt    time.Time
	Content   json.RawMessage // as sent, spliced verbatim
}

// Item is one entry of a user's channel. Which fields are set depends on What (see the What
// constants); zero fields are left out of its JSON.
type Item struct {
	What    string
	Topic   domain.Topic  // the conversation it concerns; zero for none
	From    domain.UserID // who made the change
	Src     domain.UserID // whom it concerns
	Role    domain.Role   // WhatRole
	ReadSeq int64         // WhatRead
	Change  string        // WhatAccount
	Reason  string        // WhatAccount
	Message *Message      // WhatConv
	At      time.Time
}

// body is the item's JSON object, as the frame carries it, without its seq and epoch: the log
// puts them first when it appends the item.
func (it Item) body() []byte {
	var b bytes.Buffer
	b.Grow(128)
	b.WriteString(`{"what":`)
	writeString(&b, it.What)
	if !it.Topic.IsZero() {
		b.WriteString(`,"topic":`)
		writeString(&b, it.Topic.String())
	}
	writeID(&b, "from", it.From)
	writeID(&b, "src", it.Src)
	if it.Role != "" {
		b.WriteString(`,"role":`)
		writeString(&b, string(it.Role))
	}
	if it.ReadSeq > 0 {
		b.WriteString(`,"read_seq":"`)
		b.WriteString(strconv.FormatInt(it.ReadSeq, 10))
		b.WriteString(`"`)
	}
	if it.Change != "" {
		b.WriteString(`,"change":`)
		writeString(&b, it.Change)
	}
	if it.Reason != "" {
		b.WriteString(`,"reason":`)
		writeString(&b, it.Reason)
	}
	if it.Message != nil {
		b.WriteString(`,"message":`)
		it.Message.write(&b)
	}
	b.WriteString(`,"ts":"`)
	b.WriteString(Timestamp(it.At))
	b.WriteString(`"}`)
	return b.Bytes()
}

// write encodes m as a data frame's body: content byte for byte.
func (m *Message) write(b *bytes.Buffer) {
	b.WriteString(`{"seq":"`)
	b.WriteString(strconv.FormatInt(m.Seq, 10))
	b.WriteString(`","from":"`)
	b.WriteString(m.From.String())
	b.WriteString(`"`)
	if m.MessageID != "" {
		b.WriteString(`,"message_id":`)
		writeString(b, m.MessageID)
	}
	if m.MsgType != "" && m.MsgType != domain.MsgText {
		b.WriteString(`,"msg_type":`)
		writeString(b, string(m.MsgType))
	}
	if m.Head != nil {
		if h, err := json.Marshal(m.Head); err == nil {
			b.WriteString(`,"head":`)
			b.Write(h)
		}
	}
	b.WriteString(`,"ts":"`)
	b.WriteString(Timestamp(m.SentAt))
	b.WriteString(`"`)
	if len(m.Content) > 0 {
		b.WriteString(`,"content":`)
		b.Write(m.Content)
	}
	b.WriteString(`}`)
}

// withSeq is body with its seq and the log's epoch put first, as the log stores it.
func withSeq(body []byte, seq int64, epoch string) []byte {
	out := make([]byte, 0, len(body)+48)
	out = append(out, `{"seq":"`...)
	out = strconv.AppendInt(out, seq, 10)
	out = append(out, `","epoch":"`...)
	out = append(out, epoch...)
	out = append(out, `",`...)
	return append(out, body[1:]...)
}

// Timestamp formats t as every frame does: UTC, milliseconds, "2026-11-29T07:55:43.056Z".
func Timestamp(t time.Time) string {
	return t.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00")
}

func writeString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s)
	b.Write(q)
}

func writeID(b *bytes.Buffer, name string, u domain.UserID) {
	if u == 0 {
		return
	}
	b.WriteString(`,"`)
	b.WriteString(name)
	b.WriteString(`":"`)
	b.WriteString(u.String())
	b.WriteString(`"`)
}
