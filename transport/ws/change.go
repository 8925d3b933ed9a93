package ws

import (
	"bytes"
	"strconv"

	"github.com/imledger/imledger/transport/fanout"
)

// encodeMessageChange is the info frame of a committed recall or edit (a fanout.KindChange message):
//
//	{"info":{"topic":"grp7","from":"42","what":"recall","seq":"5","message_id":"…","ts":"…"}}
//	{"info":{"topic":"grp7","from":"42","what":"edit","seq":"5","message_id":"…","version":"2","ts":"…","content":…}}
//
// from is who changed the message (its sender), version the content version after an edit, and
// content the new content byte for byte, as in a data frame.
func encodeMessageChange(m *fanout.Message) []byte {
	var b bytes.Buffer
	b.Grow(160 + len(m.Content))
	b.WriteString(`{"info":{"topic":`)
	writeString(&b, m.Topic.String())
	b.WriteString(`,"from":"`)
	b.WriteString(m.From.String())
	b.WriteString(`","what":`)
	writeString(&b, m.What)
	b.WriteString(`,"seq":"`)
	b.WriteString(strconv.FormatInt(m.Seq, 10))
	b.WriteString(`"`)
	if m.MessageID != "" {
		b.WriteString(`,"message_id":`)
		writeString(&b, m.MessageID)
	}
	if m.Version > 0 {
		b.WriteString(`,"version":"`)
		b.WriteString(strconv.FormatInt(m.Version, 10))
		b.WriteString(`"`)
	}
	b.WriteString(`,"ts":"`)
	b.WriteString(timestamp(m.TS))
	b.WriteString(`"`)
	if len(m.Content) > 0 {
		b.WriteString(`,"content":`)
		b.Write(m.Content)
	}
	b.WriteString(`}}`)
	return b.Bytes()
}
