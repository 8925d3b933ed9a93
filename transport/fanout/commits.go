package fanout

import (
	"context"

	"github.com/imledger/imledger/commands/message"
)

// MessagePublisher is what Commits hands messages to: a *Fanout, or a single node's hub.
type MessagePublisher interface {
	Publish(m *Message)
}

// Commits delivers what the commands commit to the topics' online sessions: every message a
// send committed (KindData) and every recall and edit (KindChange). It is the commit listener of
// the send handler and the change listener of the message operations, so a message is
// delivered once, at its commit, whoever sent it (WebSocket, REST, admin) and whatever became of
// the sender. It never blocks: Publish queues (see Fanout).
type Commits struct {
	Publisher MessagePublisher
}

var (
	_ message.CommitListener = Commits{}
	_ message.ChangeListener = Commits{}
)

// MessagesCommitted implements message.CommitListener.
func (c Commits) MessagesCommitted(_ context.Context, msgs []message.CommittedMessage) {
	for _, cm := range msgs {
		m := &Message{Kind: KindData, Tenant: cm.Tenant, Topic: cm.Topic, From: cm.From, Seq: cm.Seq,
			MessageID: cm.MessageID, MsgType: cm.MsgType, TS: cm.SentAt, Content: cm.Content.Raw()}
		if h := cm.Head; len(h.Mentions) > 0 || h.MentionAll || h.ReplySeq != 0 || h.RootSeq != 0 {
			m.Head = &h
		}
		if r := cm.Route; r != nil {
			m.route, m.routedAt = r.Nodes, r.ReadAt
		}
		c.Publisher.Publish(m)
	}
}

// MessageChanged implements message.ChangeListener.
func (c Commits) MessageChanged(_ context.Context, ch message.CommittedChange) {
	c.Publisher.Publish(&Message{Kind: KindChange, Tenant: ch.Tenant, Topic: ch.Topic, From: ch.By, Seq: ch.Seq,
		MessageID: ch.MessageID, What: ch.What, Version: ch.Version, TS: ch.At, Content: ch.Content})
}
