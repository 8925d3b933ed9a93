package domain

import (
	"encoding/json"
	"regexp"
	"strconv"
)

// DefaultMaxContentBytes is the default limit on a message's serialized content.
const DefaultMaxContentBytes = 64 << 10

// MaxMentions is the most users one message may mention.
const MaxMentions = 100

// ClientMsgID is the client-chosen idempotency id of a message: 1 to 64 characters of
// [A-Za-z0-9._:-], unique per sender and topic.
type ClientMsgID struct{ v string }

var clientMsgIDRe = regexp.MustCompile(`^[A-Za-z0-9._:\-]{1,64}$`)

// NewClientMsgID validates s.
func NewClientMsgID(s string) (ClientMsgID, error) {
	if s == "" {
		return ClientMsgID{}, invalid("client_msg_id", "required", "")
	}
	if len(s) > 64 {
		return ClientMsgID{}, invalid("client_msg_id", "too_long", "at most 64 characters")
	}
	if !clientMsgIDRe.MatchString(s) {
		return ClientMsgID{}, invalid("client_msg_id", "bad_format", "characters of [A-Za-z0-9._:-]")
	}
	return ClientMsgID{v: s}, nil
}

// String returns the id.
func (c ClientMsgID) String() string { return c.v }

// MsgType is the kind of message content.
type MsgType string

// The message types.
const (
	MsgText   MsgType = "text"
	MsgImage  MsgType = "image"
	MsgFile   MsgType = "file"
	MsgAudio  MsgType = "audio"
	MsgVideo  MsgType = "video"
	MsgSystem MsgType = "system"
)

// ParseMsgType validates s; empty means text.
func ParseMsgType(s string) (MsgType, error) {
	switch MsgType(s) {
	case "":
		return MsgText, nil
	case MsgText, MsgImage, MsgFile, MsgAudio, MsgVideo, MsgSystem:
		return MsgType(s), nil
	}
	return "", invalid("msg_type", "unknown", "one of text, image, file, audio, video, system")
}

// Content is a message body: any non-null JSON value (a string for plain text, an object for rich
// content or file metadata) within a size limit. Binary files never travel in content.
type Content struct{ raw json.RawMessage }

// NewContent validates raw as JSON of at most maxBytes bytes (DefaultMaxContentBytes when maxBytes <= 0).
func NewContent(raw []byte, maxBytes int) (Content, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxContentBytes
	}
	if len(raw) == 0 || string(raw) == "null" || string(raw) == `""` {
		return Content{}, invalid("content", "required", "")
	}
	if len(raw) > maxBytes {
		return Content{}, invalid("content", "too_large", "at most "+strconv.Itoa(maxBytes)+" bytes")
	}
	if !json.Valid(raw) {
		return Content{}, invalid("content", "bad_json", "content must be a JSON value")
	}
	cp := make([]byte, len(raw))
	copy(cp, raw)
	return Content{raw: cp}, nil
}

// TextContent is NewContent for a plain-text string.
func TextContent(s string, maxBytes int) (Content, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return Content{}, invalid("content", "bad_json", err.Error())
	}
	return NewContent(b, maxBytes)
}

// Raw returns the JSON bytes; callers must not modify them.
func (c Content) Raw() json.RawMessage { return c.raw }

// Size returns the serialized size in bytes.
func (c Content) Size() int { return len(c.raw) }

// Head is the message head: mentions and reply context.
type Head struct {
	Mentions   []UserID `json:"mentions,omitempty"`
	MentionAll bool     `json:"mention_all,omitempty"`
	ReplySeq   int64    `json:"reply_seq,omitempty,string"`
	RootSeq    int64    `json:"root_seq,omitempty,string"`
}

// Validate checks mention count and seq ranges; it deduplicates mentions in place.
func (h *Head) Validate() error {
	if len(h.Mentions) > MaxMentions {
		return invalid("head.mentions", "too_many", "at most "+strconv.Itoa(MaxMentions))
	}
	seen := make(map[UserID]struct{}, len(h.Mentions))
	out := h.Mentions[:0]
	for _, m := range h.Mentions {
		if m <= 0 {
			return invalid("head.mentions", "bad_format", "positive user ids")
		}
		if _, dup := seen[m]; !dup {
			seen[m] = struct{}{}
			out = append(out, m)
		}
	}
	h.Mentions = out
	if h.ReplySeq < 0 || h.RootSeq < 0 {
		return invalid("head.reply_seq", "bad_format", "non-negative")
	}
	return nil
}
