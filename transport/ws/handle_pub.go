package ws

import (
	"context"
	"net/http"

	"github.com/imledger/imledger/commands"
	"github.com/imledger/imledger/transport/fanout"
)

// onPub sends a message. The ack (202, params topic, seq, message_id, ts, and duplicate for a
// resend of a client_msg_id already sent) comes after the event is committed; then the message
// goes to the topic's online sessions, the sender's included. A refused pub writes nothing.
func (s *session) onPub(ctx context.Context, f pubFrame) {
	if !s.authenticated(ctx, f.ID) {
		return
	}
	t, ok := s.topicOf(ctx, f.ID, f.Topic)
	if !ok {
		return
	}
	if err := s.g.deps.Policy.CanPublish(ctx, s.tenant, s.user, t); err != nil {
		s.fail(ctx, f.ID, err)
		return
	}
	trace := s.id + "-" + f.ID
	if len(trace) > commands.MaxTraceIDLen {
		trace = trace[:commands.MaxTraceIDLen]
	}
	cmd, err := commands.NewSendMessage(commands.SendMessageInput{
		Tenant: s.tenant.String(), From: s.user.String(), Topic: t.String(), ClientMsgID: f.ClientMsgID,
		MsgType: f.MsgType, Content: f.Content, Head: f.Head, TraceID: trace,
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
	if res.Duplicate {
		return // delivered when it was first sent
	}
	m := &fanout.Message{Kind: fanout.KindData, Tenant: s.tenant, Topic: t, From: s.user, Seq: res.Seq,
		MessageID: res.MessageID, MsgType: cmd.MsgType, TS: res.SentAt, Content: cmd.Content.Raw()}
	if h := cmd.Head; len(h.Mentions) > 0 || h.MentionAll || h.ReplySeq != 0 || h.RootSeq != 0 {
		m.Head = &h
	}
	s.g.deps.Publisher.Publish(m)
}
