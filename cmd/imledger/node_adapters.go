package main

import (
	"context"
	"time"

	"github.com/imledger/imledger/commands/files"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/filedb"
	"github.com/imledger/imledger/readmodels/query"
	"github.com/imledger/imledger/transport/rest"
	"github.com/imledger/imledger/transport/ws"
)

// The send handler's file check (node.fileAccess) is files.Access over the file records and the
// read policy.
var (
	_ message.FileAccess = (*files.Access)(nil)
	_ files.SharedFiles  = (*filedb.Store)(nil)
	_ files.TopicReader  = rest.MemberReadPolicy{}
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
