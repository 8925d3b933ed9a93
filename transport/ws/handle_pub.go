package ws

import (
	"context"
	"net/http"
	"strings"

	"github.com/imledger/imledger/commands/message"
)

// onPub sends a message. The ack (202, params topic, seq, message_id, ts, and duplicate for a
// resend of a client_msg_id already sent) comes after the event is committed. The message goes
// to the topic's online sessions, the sender's included, at its commit: the send handler's
// commit listener publishes it (also when this session has gone by then), so the sender's own
// data frame may come before the ack, and a duplicate is never delivered again. A refused pub
// writes nothing.
func (s *session) onPub(ctx context.Context, f pubFrame) {
	if !s.authenticated(ctx, f.ID) {
		return
	}
	t, ok := s.topicOf(ctx, f.ID, f.Topic)
	if !ok {
		return
	}
	if c, ok := s.g.deps.Policy.(checkedBySender); !ok || !c.pubCheckedBySender() {
		if err := s.g.deps.Policy.CanPublish(ctx, s.tenant, s.user, t); err != nil {
			s.fail(ctx, f.ID, err)
			return
		}
	}
	cmd, err := message.NewSendMessage(message.SendMessageInput{
		Tenant: s.tenant.String(), From: s.user.String(), Topic: t.String(), ClientMsgID: f.ClientMsgID,
		MsgType: f.MsgType, Content: f.Content, Head: f.Head, TraceID: pubTrace(s.id, f.ID),
	}, s.contentLimit(ctx))
	if err != nil {
		s.fail(ctx, f.ID, err)
		return
	}
	res, err := s.g.deps.Sender.Handle(ctx, cmd)
	if err != nil {
		s.fail(ctx, f.ID, err)
		return
	}
	params := map[string]any{"topic": t.String(), "seq": formatSeq(res.Seq), "message_id": res.MessageID, "ts": timestamp(res.SentAt)}
	if res.Duplicate {
		params["duplicate"] = true
	}
	s.sendCtrl(ctrl{ID: f.ID, Code: http.StatusAccepted, Text: "accepted", Params: params})
}

// pubTrace is the trace id of a pub: the session id and the frame id, which the client chose, so
// only its characters of [A-Za-z0-9._:-] are kept (others become '_'), within
// message.MaxTraceIDLen bytes. The event store keeps it as text.
func pubTrace(sessionID, frameID string) string {
	var b strings.Builder
	b.Grow(min(len(sessionID)+1+len(frameID), message.MaxTraceIDLen))
	b.WriteString(sessionID)
	b.WriteByte('-')
	for i := 0; i < len(frameID) && b.Len() < message.MaxTraceIDLen; i++ {
		c := frameID[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
