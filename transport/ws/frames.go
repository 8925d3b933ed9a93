package ws

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/transport/fanout"
)

// ProtocolVersion is the frame protocol version a hi answers with.
const ProtocolVersion = "1"

// Client frames. Every frame is a JSON object with exactly one key naming its type.

type hiFrame struct {
	ID  string `json:"id"`
	Ver string `json:"ver"`
	UA  string `json:"ua"`
}

type loginFrame struct {
	ID    string `json:"id"`
	Token string `json:"token"`
}

type topicFrame struct { // sub and leave
	ID    string `json:"id"`
	Topic string `json:"topic"`
}

type pubFrame struct {
	ID          string          `json:"id"`
	Topic       string          `json:"topic"`
	ClientMsgID string          `json:"client_msg_id"`
	MsgType     string          `json:"msg_type"`
	Content     json.RawMessage `json:"content"`
	Head        json.RawMessage `json:"head"`
}

type getFrame struct {
	ID        string   `json:"id"`
	Topic     string   `json:"topic"`
	AfterSeq  seqParam `json:"after_seq"`
	BeforeSeq seqParam `json:"before_seq"`
	Limit     int      `json:"limit"`
	Epoch     string   `json:"epoch"` // the channel log's epoch of after_seq (topic "me" only)
}

type noteFrame struct {
	Topic string   `json:"topic"`
	What  string   `json:"what"`
	Seq   seqParam `json:"seq"`
}

type pingFrame struct {
	ID string `json:"id"`
}

// seqParam is a seq as a client sends it: a decimal string ("42") as the protocol says, or a
// JSON number for convenience; absent or null is 0. Only canonical digits make a seq: no sign, no
// leading zero (but "0"), no fraction or exponent, at most 2^63-1. A string or number that is not
// one is kept as bad, for the handler to refuse with the field's name (value); a value of another
// JSON type fails the decode.
type seqParam struct {
	n   int64
	bad bool
}

func (s *seqParam) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	digits := b
	if len(b) > 0 && b[0] == '"' {
		var str string
		if err := json.Unmarshal(b, &str); err != nil { // escapes such as "\u0035" decoded
			return err
		}
		digits = []byte(str)
	} else if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return errors.New("seq must be a string of decimal digits")
	}
	n, ok := parseSeq(digits)
	*s = seqParam{n: n, bad: !ok}
	return nil
}

// parseSeq parses canonical decimal digits into a non-negative int64.
func parseSeq(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 19 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

// value is the seq, or a 400 invalid naming field (reason bad_format) when the client sent no seq
// in a seq's place.
func (s seqParam) value(field string) (int64, error) {
	if s.bad {
		return 0, &domain.ValidationError{Field: field, Reason: "bad_format", Detail: "a seq: decimal digits without sign or leading zeros"}
	}
	return s.n, nil
}

// frameID extracts the "id" of a frame body that did not decode, so the error answer can echo
// it; "" when there is none.
func frameID(body json.RawMessage) string {
	var v struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	var id string
	if json.Unmarshal(v.ID, &id) == nil {
		return id
	}
	return ""
}

// Server frames.

// ctrl answers a client frame, or reports a session-level error.
type ctrl struct {
	ID     string         `json:"id,omitempty"`
	Code   int            `json:"code"`
	Text   string         `json:"text"`
	Reason string         `json:"reason,omitempty"`
	Params map[string]any `json:"params,omitempty"`
	TS     string         `json:"ts"`
}

type presFrame struct {
	Topic string `json:"topic"`
	What  string `json:"what"`
	Src   string `json:"src"`
}

// infoFrame is a note (from always set) or a committed change of the topic (from and src set
// when there is such a user and it is known).
type infoFrame struct {
	Topic string `json:"topic"`
	From  string `json:"from,omitempty"`
	What  string `json:"what"`
	Seq   string `json:"seq,omitempty"`
	Src   string `json:"src,omitempty"`
}

// timestamp formats t as the protocol's ts: UTC RFC 3339 with milliseconds.
func timestamp(t time.Time) string {
	return t.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00")
}

func encodeCtrl(c ctrl) []byte {
	if c.TS == "" {
		c.TS = timestamp(time.Now())
	}
	b, err := json.Marshal(struct {
		Ctrl ctrl `json:"ctrl"`
	}{c}) // a struct, not a one-key map: no map to build and sort for every answer
	if err != nil {
		// Params hold strings, numbers and booleans only.
		panic("ws: encode ctrl: " + err.Error())
	}
	return b
}

// dataFields are the fields of a data frame.
type dataFields struct {
	Topic     string
	Seq       int64
	From      string
	MessageID string // omitted when empty (the read models, and so history frames, do not carry it)
	MsgType   string
	Status    string // "" for a normal message, "recalled" or "blocked" for one without content (history only)
	Version   int64  // the content version; 0 omits it (live frames: a new message is version 1)
	Head      any    // nil, or a value encoding the head
	TS        time.Time
	UpdatedAt time.Time       // when the message last changed; zero omits it (live frames)
	Content   json.RawMessage // spliced verbatim
}

// encodeData builds a data frame by hand so content appears byte for byte as the sender sent it:
// encoding/json would compact and HTML-escape it. Content was validated as JSON on the way in.
func encodeData(d dataFields) []byte {
	var b bytes.Buffer
	b.Grow(160 + len(d.Content))
	b.WriteString(`{"data":{"topic":`)
	writeString(&b, d.Topic)
	b.WriteString(`,"seq":"`)
	b.WriteString(strconv.FormatInt(d.Seq, 10))
	b.WriteString(`","from":"`)
	b.WriteString(d.From) // a decimal user id
	b.WriteString(`"`)
	if d.MessageID != "" {
		b.WriteString(`,"message_id":`)
		writeString(&b, d.MessageID)
	}
	if d.MsgType != "" && d.MsgType != "text" {
		b.WriteString(`,"msg_type":`)
		writeString(&b, d.MsgType)
	}
	if d.Status != "" {
		b.WriteString(`,"status":`)
		writeString(&b, d.Status)
	}
	if d.Version > 0 {
		b.WriteString(`,"version":"`)
		b.WriteString(strconv.FormatInt(d.Version, 10))
		b.WriteString(`"`)
	}
	if d.Head != nil {
		if h, err := json.Marshal(d.Head); err == nil {
			b.WriteString(`,"head":`)
			b.Write(h)
		}
	}
	b.WriteString(`,"ts":"`)
	b.WriteString(timestamp(d.TS))
	b.WriteString(`"`)
	if !d.UpdatedAt.IsZero() {
		b.WriteString(`,"updated_at":"`)
		b.WriteString(timestamp(d.UpdatedAt))
		b.WriteString(`"`)
	}
	if len(d.Content) > 0 {
		b.WriteString(`,"content":`)
		b.Write(d.Content)
	}
	b.WriteString(`}}`)
	return b.Bytes()
}

func writeString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s)
	b.Write(q)
}

// dataFromFanout is the data frame of a committed message.
func dataFromFanout(m *fanout.Message) []byte {
	d := dataFields{Topic: m.Topic.String(), Seq: m.Seq, From: m.From.String(), MessageID: m.MessageID,
		MsgType: string(m.MsgType), TS: m.TS, Content: m.Content}
	if m.Head != nil {
		d.Head = m.Head
	}
	return encodeData(d)
}

// dataFromHistory is the data frame of a stored message. It carries the content version (the one
// an edit sends back) and when the message last changed, as REST history does; the read models
// keep no message_id, so the frame has none.
func dataFromHistory(m readmodels.Message) []byte {
	m.Redact()
	d := dataFields{Topic: m.Topic, Seq: m.Seq, From: m.From.String(),
		MsgType: string(m.MsgType), Version: m.Version, TS: m.SentAt, UpdatedAt: m.UpdatedAt, Content: m.Content}
	if m.Status != "" && m.Status != readmodels.StatusNormal {
		d.Status = m.Status
	}
	if m.Head != nil {
		d.Head = m.Head
	}
	return encodeData(d)
}

func encodePres(p presFrame) []byte {
	b, _ := json.Marshal(map[string]presFrame{"pres": p})
	return b
}

func encodeInfo(i infoFrame) []byte {
	b, _ := json.Marshal(map[string]infoFrame{"info": i})
	return b
}
