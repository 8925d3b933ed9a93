package main

import (
	"context"
	"sync/atomic"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/ws"
)

// realtimeNotifier is the group handlers' Notifier: it gives every committed change its realtime
// effects (ws.Notifier) over this node's fanout, so a removed member, a dissolved group's members
// and a blocked peer lose their subscriptions on every node at once and the topics' online
// members hear of each change. The handlers are built before the fanout (startCommands runs
// before startRealtime), so it finds the fanout through the node when the first change comes;
// only requests call the handlers, and they are served after startRealtime. A change before that
// has no session to tell and is not pushed.
type realtimeNotifier struct {
	n  *node
	fx atomic.Pointer[ws.Notifier]
}

var _ group.Notifier = (*realtimeNotifier)(nil)

// effects returns the realtime effects over the node's fanout, nil while there is no fanout.
func (r *realtimeNotifier) effects() *ws.Notifier {
	if fx := r.fx.Load(); fx != nil {
		return fx
	}
	if r.n.fanout == nil {
		return nil
	}
	fx, err := ws.NewNotifier(r.n.fanout, r.n.log.With("component", "realtime"))
	if err != nil {
		return nil
	}
	r.fx.CompareAndSwap(nil, fx)
	return r.fx.Load()
}

// GroupChanged implements group.Notifier.
func (r *realtimeNotifier) GroupChanged(ctx context.Context, tenant domain.TenantID, g domain.GroupID, change group.ChangeKind) {
	if fx := r.effects(); fx != nil {
		fx.GroupChanged(ctx, tenant, g, change)
	}
}

// MembershipChanged implements group.Notifier.
func (r *realtimeNotifier) MembershipChanged(ctx context.Context, tenant domain.TenantID, g domain.GroupID, user domain.UserID, change group.ChangeKind) {
	if fx := r.effects(); fx != nil {
		fx.MembershipChanged(ctx, tenant, g, user, change)
	}
}

// RelationChanged implements group.Notifier.
func (r *realtimeNotifier) RelationChanged(ctx context.Context, tenant domain.TenantID, a, b domain.UserID, change group.ChangeKind) {
	if fx := r.effects(); fx != nil {
		fx.RelationChanged(ctx, tenant, a, b, change)
	}
}

// ProfileChanged implements group.Notifier.
func (r *realtimeNotifier) ProfileChanged(ctx context.Context, tenant domain.TenantID, user domain.UserID) {
	if fx := r.effects(); fx != nil {
		fx.ProfileChanged(ctx, tenant, user)
	}
}
