package main

import (
	"context"
	"time"

	"github.com/imledger/imledger/commands"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/query"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/rest"
	"github.com/imledger/imledger/transport/ws"
)

// stateMembers answers whether a user is a group member from folded membership streams of the
// event store (the send policy's Loader), trusting a cached state for at most maxAge. It is the
// membership source of the read policy while no projection feeds the business read model.
type stateMembers struct {
	loader *group.Loader
	maxAge time.Duration
}

var _ rest.MembershipReader = stateMembers{}

// IsMember implements rest.MembershipReader. Nobody is a member of a dissolved group any more:
// its memberships are left as they were (dissolving a 10k group stays O(1)), so the group's own
// state decides.
func (m stateMembers) IsMember(ctx context.Context, tenant domain.TenantID, gid domain.GroupID, uid domain.UserID) (bool, error) {
	s, err := m.loader.Membership(ctx, tenant, gid, uid, m.maxAge)
	if err != nil || !s.IsMember() {
		return false, err
	}
	g, err := m.loader.Group(ctx, tenant, gid, m.maxAge)
	if err != nil {
		return false, err
	}
	return !g.Dissolved(), nil
}

// wsHistory answers the gateway's history queries from the read models.
type wsHistory struct{ r *query.Reader }

var _ ws.HistoryReader = wsHistory{}

// History implements ws.HistoryReader.
func (h wsHistory) History(ctx context.Context, tenant domain.TenantID, topic domain.Topic, viewer domain.UserID, q ws.HistoryQuery) (ws.HistoryPage, error) {
	p, err := h.r.History(ctx, tenant, topic, viewer, query.HistoryQuery{AfterSeq: q.AfterSeq, BeforeSeq: q.BeforeSeq, Limit: q.Limit})
	if err != nil {
		return ws.HistoryPage{}, err
	}
	return ws.HistoryPage{Messages: p.Messages, LastSeq: p.LastSeq, HasMore: p.HasMore}, nil
}

// fanoutSender hands every message it commits to the realtime fanout, so messages sent over REST
// reach online WebSocket sessions as the gateway's own sends do. A duplicate send is not
// delivered again: it was when first sent. The gateway publishes its sends itself and uses the
// plain handler.
type fanoutSender struct {
	next rest.MessageSender
	pub  ws.Publisher
}

var _ rest.MessageSender = fanoutSender{}

// Handle sends cmd and, once committed, publishes it.
func (s fanoutSender) Handle(ctx context.Context, cmd commands.SendMessage) (commands.SendResult, error) {
	res, err := s.next.Handle(ctx, cmd)
	if err != nil || res.Duplicate {
		return res, err
	}
	m := &fanout.Message{Kind: fanout.KindData, Tenant: cmd.Tenant, Topic: cmd.Topic, From: cmd.From, Seq: res.Seq,
		MessageID: res.MessageID, MsgType: cmd.MsgType, TS: res.SentAt, Content: cmd.Content.Raw()}
	if h := cmd.Head; len(h.Mentions) > 0 || h.MentionAll || h.ReplySeq != 0 || h.RootSeq != 0 {
		m.Head = &h
	}
	s.pub.Publish(m)
	return res, nil
}
