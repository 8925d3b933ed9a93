package userchan

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/fanout"
)

// Publisher hands user items to the nodes named (fanout.Fanout implements it).
type Publisher interface {
	PublishNodes(ctx context.Context, routed ...fanout.Routed) error
}

// Directory names the users a group change concerns beyond the member it is about (the
// business read model implements it). Its answers may trail the change by the read model's lag.
type Directory interface {
	// Moderators are the group's owner and admins: they decide join requests.
	Moderators(ctx context.Context, tenant domain.TenantID, gid domain.GroupID) ([]domain.UserID, error)
	// MemberIDs are the group's members: they hear its dissolution.
	MemberIDs(ctx context.Context, tenant domain.TenantID, gid domain.GroupID) ([]domain.UserID, error)
}

// Deps are the collaborators of a Channel.
type Deps struct {
	Log *Log // required
	// Publisher delivers each logged item to the nodes with a channel session of its user.
	// Optional: without it items are logged, and sessions read them when they catch up.
	Publisher Publisher
	// Directory finds the deciders of join requests and the members of a dissolved group.
	// Optional: without it those items reach the member concerned only.
	Directory  Directory
	Logger     *slog.Logger          // default discards
	Registerer prometheus.Registerer // optional
}

// Channel logs the items of the users' channels and delivers them. It hears committed group,
// membership and relation changes (group.ChangeListener), read marks (message.ReadListener)
// and the first message of each 1:1 conversation (message.CommitListener), and logs account
// changes for the access notifier (Account). Items of one change are logged, then delivered,
// before the call returns, so a command's items are in the log when it answers; the first
// messages, heard on the sequencer's path, are queued and logged by a goroutine of their own
// (Run). A Redis failure loses the items of that call for the log (logged and counted); a
// client catching up sees no gap then, only what the read models say when it next re-reads them.
type Channel struct {
	log   *Log
	pub   Publisher
	dir   Directory
	lg    *slog.Logger
	items *prometheus.CounterVec
	errs  *prometheus.CounterVec

	queue chan queued
}

// queued is an item waiting for Run.
type queued struct {
	tenant domain.TenantID
	posts  []post
}

// post is one item for one user.
type post struct {
	user domain.UserID
	item Item
}

var (
	_ group.ChangeListener   = (*Channel)(nil)
	_ message.ReadListener   = (*Channel)(nil)
	_ message.CommitListener = (*Channel)(nil)
)

// New returns a Channel over deps.Log.
func New(deps Deps) (*Channel, error) {
	if deps.Log == nil {
		return nil, errors.New("userchan: a Log is required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Channel{log: deps.Log, pub: deps.Publisher, dir: deps.Directory, lg: deps.Logger,
		queue: make(chan queued, deps.Log.cfg.QueueSize),
		items: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imledger_userchan_items_total",
			Help: "Items logged on users' channels, by kind.",
		}, []string{"what"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imledger_userchan_errors_total",
			Help: "Items of users' channels lost for the log or its live delivery, by operation (append, publish, queue_full, directory).",
		}, []string{"op"}),
	}
	for _, op := range []string{"append", "publish", "queue_full", "directory"} {
		c.errs.WithLabelValues(op)
	}
	if deps.Registerer != nil {
		for _, m := range []prometheus.Collector{c.items, c.errs} {
			if err := deps.Registerer.Register(m); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// Log returns the channel's log.
func (c *Channel) Log() *Log { return c.log }

// Run logs the queued items until ctx ends. Start it once; without it queued items wait.
func (c *Channel) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case q := <-c.queue:
			c.post(ctx, q.tenant, q.posts)
		}
	}
}

// enqueue queues posts for Run without waiting; a full queue drops them (counted).
func (c *Channel) enqueue(tenant domain.TenantID, posts []post) {
	select {
	case c.queue <- queued{tenant, posts}:
	default:
		c.errs.WithLabelValues("queue_full").Add(float64(len(posts)))
	}
}

// post logs posts, user by user in the order given, and delivers each item to the nodes with a
// channel session of its user.
func (c *Channel) post(ctx context.Context, tenant domain.TenantID, posts []post) {
	if len(posts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.log.cfg.PublishTimeout)
	defer cancel()
	var batches []Batch
	index := map[domain.UserID]int{}
	for _, p := range posts {
		i, ok := index[p.user]
		if !ok {
			i = len(batches)
			index[p.user] = i
			batches = append(batches, Batch{User: p.user})
		}
		batches[i].Items = append(batches[i].Items, p.item)
	}
	done, err := c.log.Append(ctx, tenant, batches)
	if err != nil {
		c.errs.WithLabelValues("append").Add(float64(len(posts)))
		c.lg.WarnContext(ctx, "userchan: items not logged", "tenant_id", tenant.String(), "items", len(posts), "err", err)
		return
	}
	var routed []fanout.Routed
	for i, a := range done {
		for j, it := range batches[i].Items {
			c.items.WithLabelValues(it.What).Inc()
			if c.pub != nil && len(a.Nodes) > 0 {
				routed = append(routed, fanout.Routed{Nodes: a.Nodes, Message: &fanout.Message{Kind: fanout.KindUser,
					Tenant: tenant, To: a.User, What: it.What, Topic: it.Topic, Src: it.Src, TS: it.At, Content: a.Bodies[j]}})
			}
		}
	}
	if len(routed) == 0 {
		return
	}
	if err := c.pub.PublishNodes(ctx, routed...); err != nil {
		c.errs.WithLabelValues("publish").Add(float64(len(routed)))
		c.lg.WarnContext(ctx, "userchan: items logged, not delivered live", "tenant_id", tenant.String(), "items", len(routed), "err", err)
	}
}

// Post logs item on the channel of each of users (each once) and delivers it, before it
// returns. For callers outside the command handlers (tests, tools).
func (c *Channel) Post(ctx context.Context, tenant domain.TenantID, item Item, users ...domain.UserID) {
	c.post(ctx, tenant, postsFor(item, users))
}

// Logged is an item as the log numbered it, for a caller that delivers it itself.
type Logged struct {
	Seq  int64
	Body []byte // the item's JSON object, seq and epoch first
}

// LogOnly logs item on user's channel without delivering it, and returns it as logged: the
// access notifier sends an account item with the account change to every node. A Redis failure
// is wrapped as domain.ErrRetryable.
func (c *Channel) LogOnly(ctx context.Context, tenant domain.TenantID, user domain.UserID, item Item) (Logged, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.log.cfg.PublishTimeout)
	defer cancel()
	done, err := c.log.Append(ctx, tenant, []Batch{{User: user, Items: []Item{item}}})
	if err != nil {
		c.errs.WithLabelValues("append").Inc()
		return Logged{}, err
	}
	c.items.WithLabelValues(item.What).Inc()
	return Logged{Seq: done[0].Seqs[0], Body: done[0].Bodies[0]}, nil
}

// postsFor is item for each of users, each once, in order.
func postsFor(item Item, users []domain.UserID) []post {
	out := make([]post, 0, len(users))
	var seen []domain.UserID
	for _, u := range users {
		if u <= 0 || slices.Contains(seen, u) {
			continue
		}
		seen = append(seen, u)
		out = append(out, post{user: u, item: item})
	}
	return out
}

// ReadMarked implements message.ReadListener: the user's channel logs the new read mark.
func (c *Channel) ReadMarked(ctx context.Context, r message.CommittedRead) {
	c.post(ctx, r.Tenant, []post{{user: r.User, item: Item{What: WhatRead, Topic: r.Topic, ReadSeq: r.ReadSeq, At: r.At}}})
}

// MessagesCommitted implements message.CommitListener: the first message of a 1:1 conversation
// (seq 1) is logged on both users' channels as a new conversation. It only queues (see Run).
func (c *Channel) MessagesCommitted(_ context.Context, msgs []message.CommittedMessage) {
	for _, m := range msgs {
		if m.Seq != 1 || m.Topic.Kind() != domain.TopicDirect {
			continue
		}
		msg := &Message{Seq: m.Seq, From: m.From, MessageID: m.MessageID, MsgType: m.MsgType, SentAt: m.SentAt,
			Content: m.Content.Raw()}
		if h := m.Head; len(h.Mentions) > 0 || h.MentionAll || h.ReplySeq != 0 || h.RootSeq != 0 {
			msg.Head = &h
		}
		a, b := m.Topic.Parties()
		it := Item{What: WhatConv, Topic: m.Topic, From: m.From, Message: msg, At: m.SentAt}
		c.enqueue(m.Tenant, postsFor(it, []domain.UserID{a, b}))
	}
}

// ChangesCommitted implements group.ChangeListener: each change is logged on the channels of the
// users it concerns (see recipients) and delivered.
func (c *Channel) ChangesCommitted(ctx context.Context, tenant domain.TenantID, changes []group.Change) {
	var posts []post
	now := time.Now().UTC()
	for _, ch := range changes {
		it, users := c.recipients(ctx, tenant, ch)
		if it.What == "" {
			continue
		}
		it.At = now
		posts = append(posts, postsFor(it, users)...)
	}
	c.post(ctx, tenant, posts)
}

// memberWhat is the item of each membership change; those missing are not logged.
var memberWhat = map[group.ChangeKind]string{
	group.ChangeInvited: WhatInvited, group.ChangeJoinRequested: WhatJoinRequested,
	group.ChangeJoinRejected: WhatJoinRejected, group.ChangeJoined: WhatJoined, group.ChangeLeft: WhatLeft,
	group.ChangeRemoved: WhatRemoved, group.ChangeUnbanned: WhatUnbanned, group.ChangeRoleSet: WhatRole,
	group.ChangeMuted: WhatMute, group.ChangeUnmuted: WhatUnmute,
}

// relationWhat is the item of each relation change.
var relationWhat = map[group.ChangeKind]string{
	group.ChangeFriendRequested: WhatFriendRequested, group.ChangeFriendAccepted: WhatFriendAccepted,
	group.ChangeFriendDeclined: WhatFriendDeclined, group.ChangeFriendRemoved: WhatFriendRemoved,
	group.ChangeBlocked: WhatBlocked, group.ChangeUnblocked: WhatUnblocked,
}

// recipients is the item of a change and the users whose channels log it: a relation change
// both users; a membership change the member, and for a join request, its rejection and a join
// someone else let in, the group's owner and admins too; a dissolution every member. Group
// profile, settings and announcement changes and profile changes are not logged (no item).
func (c *Channel) recipients(ctx context.Context, tenant domain.TenantID, ch group.Change) (Item, []domain.UserID) {
	if what, ok := relationWhat[ch.Kind]; ok {
		topic, err := domain.DirectTopic(ch.User, ch.Peer)
		if err != nil {
			return Item{}, nil
		}
		return Item{What: what, Topic: topic, From: ch.User, Src: ch.Peer}, []domain.UserID{ch.User, ch.Peer}
	}
	topic, err := ch.Group.Topic()
	if err != nil {
		return Item{}, nil
	}
	if ch.Kind == group.ChangeDissolved {
		return Item{What: WhatDissolved, Topic: topic, From: ch.By}, c.lookup(ctx, tenant, ch.Group, true)
	}
	what, ok := memberWhat[ch.Kind]
	if !ok {
		return Item{}, nil
	}
	it := Item{What: what, Topic: topic, From: ch.By, Src: ch.User}
	if ch.Kind == group.ChangeRoleSet {
		it.Role = ch.Role
	}
	users := []domain.UserID{ch.User}
	switch {
	case ch.Kind == group.ChangeJoinRequested, ch.Kind == group.ChangeJoinRejected,
		ch.Kind == group.ChangeJoined && ch.By != ch.User && ch.By != 0:
		users = append(users, c.lookup(ctx, tenant, ch.Group, false)...)
	}
	return it, users
}

// lookup asks the Directory for a group's members (all) or its owner and admins; nil without a
// Directory or when it fails (counted and logged).
func (c *Channel) lookup(ctx context.Context, tenant domain.TenantID, g domain.GroupID, all bool) []domain.UserID {
	if c.dir == nil {
		return nil
	}
	var (
		ids []domain.UserID
		err error
	)
	if all {
		ids, err = c.dir.MemberIDs(ctx, tenant, g)
	} else {
		ids, err = c.dir.Moderators(ctx, tenant, g)
	}
	if err != nil {
		c.errs.WithLabelValues("directory").Inc()
		c.lg.WarnContext(ctx, "userchan: group members unknown; items reach the member concerned only",
			"tenant_id", tenant.String(), "group", g.String(), "err", err)
		return nil
	}
	return ids
}

// AccountItem is the item of an account change: change is what happened (banned, unbanned,
// kicked, tokens_revoked, password_reset), reason what the sessions it ends are told ("" when it
// ends none).
func AccountItem(change, reason string, at time.Time) Item {
	return Item{What: WhatAccount, Change: change, Reason: reason, At: at}
}
