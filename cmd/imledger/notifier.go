package main

import (
	"context"
	"errors"

	"github.com/imledger/imledger/commands"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/access"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/userchan"
	"github.com/imledger/imledger/transport/ws"
)

// newRealtimeNotifier is the group handlers' Notifier: ws.Notifier gives every committed change
// its realtime effects over this node's fanout, so a removed member, a dissolved group's members
// and a blocked peer lose their subscriptions on every node at once and the topics' online
// members hear of each change.
func (n *node) newRealtimeNotifier() (group.Notifier, error) {
	return ws.NewNotifier(nodeFanout{n}, n.log.With("component", "realtime"))
}

// nodeFanout publishes control messages through the node's fanout. The group handlers are built
// before the fanout (startCommands runs before startRealtime), so it finds the fanout through the
// node when the first change comes; only requests call the handlers, and they are served after
// startRealtime. A change before that has no session to tell and is not pushed.
type nodeFanout struct{ n *node }

var _ ws.ControlPublisher = nodeFanout{}

// PublishControl implements ws.ControlPublisher.
func (f nodeFanout) PublishControl(ctx context.Context, m *fanout.Message) error {
	if f.n.fanout == nil {
		return nil
	}
	return f.n.fanout.PublishControl(ctx, m)
}

// nodeCommits delivers what the send handler and the message operations commit through the
// node's fanout (fanout.Commits), found through the node as nodeFanout finds it: the handlers
// are built before the fanout, and sends arrive only once it runs. bench write, which runs no
// fanout, delivers nothing.
type nodeCommits struct{ n *node }

var (
	_ commands.CommitListener = nodeCommits{}
	_ commands.ChangeListener = nodeCommits{}
)

// MessagesCommitted implements commands.CommitListener.
func (c nodeCommits) MessagesCommitted(ctx context.Context, msgs []commands.CommittedMessage) {
	if c.n.fanout != nil {
		fanout.Commits{Publisher: c.n.fanout}.MessagesCommitted(ctx, msgs)
	}
	if c.n.channel != nil {
		c.n.channel.MessagesCommitted(ctx, msgs) // queues: a new 1:1 chat's item never holds the sequencer
	}
	if c.n.pf.producer != nil {
		c.n.pf.producer.MessagesCommitted(ctx, msgs) // queues: offline reminders never hold the sequencer
	}
}

// MessageChanged implements commands.ChangeListener.
func (c nodeCommits) MessageChanged(ctx context.Context, ch commands.CommittedChange) {
	if c.n.fanout != nil {
		fanout.Commits{Publisher: c.n.fanout}.MessageChanged(ctx, ch)
	}
}

// nodeChannel hands what the handlers commit to the node's per-user channel (userchan), found
// through the node as nodeFanout finds the fanout: the handlers are built before it. Before
// startRealtime builds it nothing is logged; requests come only after.
type nodeChannel struct{ n *node }

var (
	_ group.ChangeListener  = nodeChannel{}
	_ commands.ReadListener = nodeChannel{}
	_ access.AccountLog     = nodeChannel{}
)

// ChangesCommitted implements group.ChangeListener.
func (c nodeChannel) ChangesCommitted(ctx context.Context, tenant domain.TenantID, changes []group.Change) {
	if c.n.channel != nil {
		c.n.channel.ChangesCommitted(ctx, tenant, changes)
	}
}

// ReadMarked implements commands.ReadListener.
func (c nodeChannel) ReadMarked(ctx context.Context, r commands.CommittedRead) {
	if c.n.channel != nil {
		c.n.channel.ReadMarked(ctx, r)
	}
}

// LogOnly implements access.AccountLog.
func (c nodeChannel) LogOnly(ctx context.Context, tenant domain.TenantID, user domain.UserID, item userchan.Item) (userchan.Logged, error) {
	if c.n.channel == nil {
		return userchan.Logged{}, errors.New("the per-user channel is not running yet")
	}
	return c.n.channel.LogOnly(ctx, tenant, user, item)
}
