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
// content or file metadata) within a size limit, which every store keeps as it is. Binary files
// never travel in content.
type Content struct {
	raw  json.RawMessage
	grow int // bytes its numbers gain when the event store writes them out in full
}

// NewContent validates raw as content of at most maxBytes bytes (DefaultMaxContentBytes when
// maxBytes <= 0). It is the one check of content on every path (send and edit), made once over
// the bytes, against what every store accepts. Refusals are *ValidationError values for field
// "content" with a stable reason:
//
//   - required: empty, null or "";
//   - too_large: more than maxBytes bytes, counting numbers written with an exponent as
//     PostgreSQL stores them, written out in full (1e300 counts 301 bytes);
//   - bad_json: not exactly one JSON value (RFC 8259);
//   - too_deep: arrays and objects nested deeper than MaxContentDepth (MariaDB refuses 32);
//   - bad_text: a string or key with invalid UTF-8, a surrogate code point (an unpaired \ud800
//     escape or one encoded raw) or U+0000 (PostgreSQL's jsonb refuses \u0000);
//   - bad_number: a number that is not a finite double (1e400), or that is not zero yet too
//     small to be told from zero (1e-400). Numbers are otherwise kept as sent; the read models
//     may write one in another notation of the same value (1E+2 as 100).
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
	grow, err := checkContent(raw)
	if err != nil {
		return Content{}, err
	}
	if len(raw)+grow > maxBytes {
		return Content{}, invalid("content", "too_large",
			"at most "+strconv.Itoa(maxBytes)+" bytes with its numbers written out in full")
	}
	cp := make([]byte, len(raw))
	copy(cp, raw)
	return Content{raw: cp, grow: grow}, nil
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

// StoredSize returns an upper bound of the content's size in the event store, where numbers
// written with an exponent are written out in full; it is Size for most content.
func (c Content) StoredSize() int { return len(c.raw) + c.grow }

// Head is the message head: mentions, reply context and the files the message references.
type Head struct {
	Mentions   []UserID `json:"mentions,omitempty"`
	MentionAll bool     `json:"mention_all,omitempty"`
	ReplySeq   int64    `json:"reply_seq,omitempty,string"`
	RootSeq    int64    `json:"root_seq,omitempty,string"`
	// Files are the ids of uploaded files the message carries; each becomes a reference that
	// keeps the file from being collected, and their number is the message's file_count.
	Files []string `json:"files,omitempty"`
}

// UnmarshalJSON decodes a head as encoding/json would, except that a mention that is a string
// but not a user id ("abc", "0", "-1") is a *ValidationError head.mentions/bad_format, like
// the other rules of Validate, rather than a JSON error; a mention of another JSON type (a
// number) stays a JSON error. REST and the WebSocket pub both decode heads through it.
func (h *Head) UnmarshalJSON(b []byte) error {
	type plain Head // without this method
	in := struct {
		*plain
		Mentions []string `json:"mentions,omitempty"` // shadows plain's, read as text first
	}{plain: (*plain)(h)}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	if in.Mentions == nil {
		return nil
	}
	ids := make([]UserID, 0, len(in.Mentions))
	for _, m := range in.Mentions {
		id, err := ParseUserID(m)
		if err != nil {
			return invalid("head.mentions", "bad_format", "user id strings (positive 64-bit decimal numbers)")
		}
		ids = append(ids, id)
	}
	h.Mentions = ids
	return nil
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
	if h.ReplySeq < 0 {
		return invalid("head.reply_seq", "bad_format", "non-negative")
	}
	if h.RootSeq < 0 {
		return invalid("head.root_seq", "bad_format", "non-negative")
	}
	if len(h.Files) > 0 {
		files, err := ValidateFileRefs(h.Files)
		if err != nil {
			return err
		}
		h.Files = files
	}
	return nil
}
