package main

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/commands/policy"
	"github.com/imledger/imledger/commands/session"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/access"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/presence"
	"github.com/imledger/imledger/transport/rest"
	"github.com/imledger/imledger/transport/userchan"
	"github.com/imledger/imledger/transport/ws"
)

// startRealtime starts presence (with its heartbeat), the cross-node fanout over Redis Pub/Sub
// and the users' channel logs that deliver through it: what the handlers, the notifier and the
// gateway, built after, deliver through.
func (n *node) startRealtime(ctx context.Context) (err error) {
	if n.presence, err = presence.New(presence.Deps{Redis: n.rdb, Logger: n.log.With("component", "presence"),
		Registerer: n.reg}, n.cfg.PresenceConfig()); err != nil {
		return err
	}
	n.aux = append(n.aux, n.spawn(ctx, "presence", n.presence.Run))
	hub := ws.NewHub()
	n.hub = hub
	// Account and tenant changes update this node's guard and tenant cache before the hub ends
	// the sessions they concern; group changes that end subscriptions mark the policies' cached
	// states stale before the hub applies them.
	var next fanout.Deliverer = hub
	if pol := n.policy; pol != nil {
		ictx := context.WithoutCancel(ctx)
		next = ws.Invalidating{Next: hub, Invalidate: func(tenant domain.TenantID, ids []string) { pol.Invalidate(ictx, tenant, ids) }}
	}
	var local fanout.Deliverer = forgetErased{next: access.NewDeliverer(next, n.tenants, n.guard), keys: n.keys}
	if n.fanout, err = fanout.New(fanout.Deps{Redis: n.rdb, Nodes: n.presence, Local: local,
		Logger: n.log.With("component", "fanout"), Registerer: n.reg}, n.cfg.FanoutConfig()); err != nil {
		return err
	}
	// Fanout runs until shutdown closes it, not until the process context ends.
	if err := n.fanout.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	return n.startChannel(ctx)
}

// startGateway starts the recorder of session events and the WebSocket gateway, which delivers
// through the fanout and the channel logs and sends and marks through the handlers.
func (n *node) startGateway(ctx context.Context) error {
	sessions, err := session.NewRecorder(n.store, n.cfg.SessionsConfig(), n.log.With("component", "sessions"))
	if err != nil {
		return err
	}
	// Stopped after the gateway closed its sessions, so their session.closed.v1 events are written.
	n.aux = append(n.aux, n.spawn(ctx, "session recorder", func(ctx context.Context) error {
		sessions.Run(ctx)
		return nil
	}))
	deps := ws.Deps{
		Tokens: n.signer, Sender: n.state.sender, Marks: n.ops, Presence: n.presence, Sessions: sessions, Hub: n.hub, Publisher: n.fanout,
		Policy: ws.MemberPolicy{Read: n.readPolicy(), Send: n.policy, SenderChecks: true}, Logger: n.log.With("component", "ws"), Registerer: n.reg,
		Panics: n.panics, Gate: n.gate,
	}
	if n.state.limiter != nil {
		deps.Limiter = n.state.limiter
	}
	if n.reader != nil {
		deps.History = wsHistory{n.reader}
	}
	if n.biz != nil {
		deps.Channel, deps.ChannelState = n.channel.Log(), n.biz
	}
	if n.gateway, err = ws.New(deps, n.cfg.WSConfig()); err != nil {
		return fmt.Errorf("ws: %w", err)
	}
	return nil
}

// readPolicy decides who may read a topic (REST history, unread, member lists; WebSocket sub and
// get): the parties of a 1:1 topic, and the current members of a group as the send policy's
// cache of the event store says (at most send_policy.ttl stale on other nodes).
func (n *node) readPolicy() rest.ReadPolicy {
	ttl := n.cfg.SendPolicy.TTL
	if ttl == 0 {
		ttl = policy.DefaultTTL
	}
	return rest.MemberReadPolicy{Members: stateMembers{loader: n.loader, maxAge: ttl}}
}

// startChannel builds the users' channel logs (transport/userchan), which deliver their items
// through the fanout, and runs the logger of the items queued off the send path.
func (n *node) startChannel(ctx context.Context) error {
	log, err := userchan.NewLog(n.rdb, n.presence.ChannelNodesKey, n.cfg.ChannelConfig())
	if err != nil {
		return fmt.Errorf("channel: %w", err)
	}
	deps := userchan.Deps{Log: log, Publisher: n.fanout, Logger: n.log.With("component", "channel"), Registerer: n.reg}
	if n.biz != nil {
		deps.Directory = n.biz
	}
	if n.channel, err = userchan.New(deps); err != nil {
		return fmt.Errorf("channel: %w", err)
	}
	n.aux = append(n.aux, n.spawn(ctx, "channel", n.channel.Run))
	return nil
}
