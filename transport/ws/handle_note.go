package ws

import (
	"context"
	"net/http"
	"time"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/fanout"
)

// onNote handles a note. Notes carry no id and succeed silently; a refused note is answered
// with an error ctrl without id.
//
//	kp        typing: relayed as info to the topic's other online sessions, never stored; at most
//	          one a Config.TypingInterval per topic, the others dropped silently
//	read      moves the read mark to seq (and the receive mark with it)
//	recv      moves the receive mark to seq
//
// A read or recv that moved a mark in a 1:1 topic is relayed as info to the other party, unless
// that party blocks the reader: the mark still moves, the blocker no longer hears of it.
func (s *session) onNote(ctx context.Context, f noteFrame) {
	if !s.authenticated(ctx, "") {
		return
	}
	t, ok := s.topicOf(ctx, "", f.Topic)
	if !ok {
		return
	}
	switch f.What {
	case "kp":
		if err := s.g.deps.Policy.CanPublish(ctx, s.tenant, s.user, t); err != nil {
			s.fail(ctx, "", err)
			return
		}
		if !s.relayTyping(t.String()) {
			return
		}
		s.g.deps.Publisher.Publish(&fanout.Message{Kind: fanout.KindInfo, Tenant: s.tenant, Topic: t, From: s.user,
			What: "kp", TS: time.Now().UTC(), SkipSession: s.id})
	case "read", "recv":
		s.onMark(ctx, t, f)
	default:
		s.fail(ctx, "", &domain.ValidationError{Field: "what", Reason: "unknown", Detail: "one of kp, read, recv"})
	}
}

func (s *session) onMark(ctx context.Context, t domain.Topic, f noteFrame) {
	seq, err := f.Seq.value("seq")
	if err != nil {
		s.fail(ctx, "", err)
		return
	}
	if seq <= 0 {
		s.fail(ctx, "", &domain.ValidationError{Field: "seq", Reason: "required"})
		return
	}
	if s.g.deps.Marks == nil {
		s.refuse(errCtrl("", http.StatusNotImplemented, ReasonNotImplemented, "read marks are not served here"))
		return
	}
	if err := s.g.deps.Policy.CanRead(ctx, s.tenant, s.user, t); err != nil {
		s.fail(ctx, "", err)
		return
	}
	cmd := message.MarkRead{Tenant: s.tenant, Topic: t, User: s.user, TraceID: s.id}
	if f.What == "read" {
		cmd.ReadSeq = seq
	} else {
		cmd.RecvSeq = seq
	}
	res, err := s.g.deps.Marks.MarkRead(ctx, cmd)
	if err != nil {
		s.fail(ctx, "", err)
		return
	}
	if res.Changed && t.Kind() == domain.TopicDirect && s.g.deps.Policy.CanPublish(ctx, s.tenant, s.user, t) == nil {
		s.g.deps.Publisher.Publish(&fanout.Message{Kind: fanout.KindInfo, Tenant: s.tenant, Topic: t, From: s.user,
			What: f.What, Seq: seq, TS: time.Now().UTC(), SkipSession: s.id})
	}
}
