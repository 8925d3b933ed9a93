package push

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/IBM/sarama"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/presence"
)

// Members lists a group's current members; *business.Store implements it.
type Members interface {
	MemberIDs(ctx context.Context, tenant domain.TenantID, gid domain.GroupID) ([]domain.UserID, error)
}

// ManyMembers is Members that also answers for many groups at once (one Redis round trip);
// *business.Store implements it. Run then looks up each group of the messages it has queued once,
// together, instead of once per message: a busy group's messages commit in batches.
type ManyMembers interface {
	Members
	// MemberIDsMany returns, for each of gids, what MemberIDs would.
	MemberIDsMany(ctx context.Context, tenant domain.TenantID, gids []domain.GroupID) ([][]domain.UserID, []error)
}

// Presences reads many users' presence at once, failing rather than answering "unknown";
// *presence.Store implements it.
type Presences interface {
	GetMany(ctx context.Context, tenant domain.TenantID, users []domain.UserID) ([]presence.Presence, error)
}

// LocalSubscribers tells which users have a session subscribed to a topic on this node; *ws.Hub
// implements it. Such a user gets the message in realtime at its commit and needs no reminder.
type LocalSubscribers interface {
	SubscribedUsers(tenant domain.TenantID, topic domain.Topic) map[domain.UserID]bool
}

// Mutes lists the users who muted a conversation's reminders; *pushdb.Store implements it.
type Mutes interface {
	MutedUsers(ctx context.Context, tenant domain.TenantID, topic domain.Topic) (map[domain.UserID]bool, error)
}

// TaskPublisher puts tasks on im.message.push; SaramaPublisher is the real one.
type TaskPublisher interface {
	PublishTasks(ctx context.Context, tasks []Task) error
}

// ProducerDeps are the collaborators of a Producer.
type ProducerDeps struct {
	Members   Members       // required
	Presence  Presences     // required
	Mutes     Mutes         // required
	Publisher TaskPublisher // required
	Redis     redis.UniversalClient
	Local     LocalSubscribers // nil: every recipient's presence is read
	Metrics   *Metrics         // required
	Logger    *slog.Logger
}

// Producer turns committed messages into push tasks (a message.CommitListener). It queues the
// messages and works them off on its own goroutines, so the sequencer never waits for it; a
// message that finds the queue full produces no reminders (counted as dropped, queue_full). A
// node that stops between a commit and its tasks loses those reminders, never a message:
// reminders are a courtesy, the client catches up by seq.
//
// Who gets a task for a message: every member of the group (the peer of a 1:1 topic) except the
// sender who is offline (presence), has not muted the topic, and has not had a reminder for the
// topic since they were last online (the quiet policy, Config.QuietFor). A user @mentioned (or
// reached by mention_all) gets a task of type "mention" whatever their mute or quiet state, as
// long as they are offline.
type Producer struct {
	cfg  Config
	deps ProducerDeps
	keys keys
	log  *slog.Logger
	q    chan []message.CommittedMessage
	// retry holds messages whose group the read model did not hold yet, due for another look.
	retry chan retryItem
}

// retryItem is a message to look at again, with how many looks it had.
type retryItem struct {
	m     message.CommittedMessage
	looks int
}

// notFoundWaits are the waits before a message is looked at again when the business read model
// does not hold its group yet: a group's first messages are committed while its creation is
// still being projected, and its offline members would get no reminder for them. After the last
// wait the message's reminders are dropped (counted as lookup_failed).
var notFoundWaits = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second,
	2 * time.Second, 4 * time.Second, 8 * time.Second}

var _ message.CommitListener = (*Producer)(nil)

// NewProducer validates its arguments; Run starts it.
func NewProducer(deps ProducerDeps, cfg Config) (*Producer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Members == nil || deps.Presence == nil || deps.Mutes == nil || deps.Publisher == nil || deps.Metrics == nil {
		return nil, errors.New("push: producer needs members, presence, mutes, a publisher and metrics")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &Producer{cfg: cfg, deps: deps, keys: keys{cfg.KeyPrefix}, log: deps.Logger,
		q: make(chan []message.CommittedMessage, cfg.QueueSize), retry: make(chan retryItem, cfg.QueueSize)}, nil
}

// MessagesCommitted implements message.CommitListener: it queues msgs and returns at once.
func (p *Producer) MessagesCommitted(_ context.Context, msgs []message.CommittedMessage) {
	select {
	case p.q <- msgs:
	default:
		p.deps.Metrics.Dropped.WithLabelValues("queue_full").Add(float64(len(msgs)))
	}
}

// Run works the queue off until ctx ends, then returns once the messages already queued are
// done (bounded by the lookups' own timeouts).
func (p *Producer) Run(ctx context.Context) error {
	for {
		select {
		case msgs := <-p.q:
			p.produceQueued(context.WithoutCancel(ctx), p.gather(ctx, msgs))
		case it := <-p.retry:
			p.produce(context.WithoutCancel(ctx), it.m, it.looks, p.deps.Members.MemberIDs)
		case <-ctx.Done():
			for {
				select {
				case msgs := <-p.q:
					p.produceQueued(context.WithoutCancel(ctx), msgs)
				default:
					return nil
				}
			}
		}
	}
}

// maxLookup bounds the messages whose groups Run looks up together.
const maxLookup = 1024

// gather adds to msgs the messages committed within Config.Linger of their arrival, up to
// maxLookup, so their groups are looked up together; it returns early when ctx ends.
func (p *Producer) gather(ctx context.Context, msgs []message.CommittedMessage) []message.CommittedMessage {
	if p.cfg.Linger <= 0 {
		return msgs
	}
	timer := time.NewTimer(p.cfg.Linger)
	defer timer.Stop()
	msgs = append(make([]message.CommittedMessage, 0, 4*len(msgs)+16), msgs...) // ours to append to
	for len(msgs) < maxLookup {
		select {
		case next := <-p.q:
			msgs = append(msgs, next...)
		case <-timer.C:
			return msgs
		case <-ctx.Done():
			return msgs
		}
	}
	return msgs
}

// produceQueued produces the tasks of msgs and of the batches queued behind them (up to
// maxLookup messages), with each group's members looked up once for all of them.
func (p *Producer) produceQueued(ctx context.Context, msgs []message.CommittedMessage) {
	for more := true; more && len(msgs) < maxLookup; {
		select {
		case next := <-p.q:
			msgs = append(msgs[:len(msgs):len(msgs)], next...)
		default:
			more = false
		}
	}
	lookup := p.lookupMembers(ctx, msgs)
	for _, m := range msgs {
		p.produce(ctx, m, 1, lookup)
	}
}

// membersOf finds a group's members: Members.MemberIDs, or an answer read ahead.
type membersOf func(ctx context.Context, tenant domain.TenantID, gid domain.GroupID) ([]domain.UserID, error)

// lookupMembers reads the members of every group msgs were sent to, per tenant in one call when
// Members is a ManyMembers, and returns a membersOf that answers from what it read.
func (p *Producer) lookupMembers(ctx context.Context, msgs []message.CommittedMessage) membersOf {
	many, ok := p.deps.Members.(ManyMembers)
	if !ok || len(msgs) < 2 {
		return p.deps.Members.MemberIDs
	}
	type groupKey struct {
		tenant domain.TenantID
		gid    domain.GroupID
	}
	type answer struct {
		ids []domain.UserID
		err error
	}
	byTenant := map[domain.TenantID][]domain.GroupID{}
	known := map[groupKey]answer{}
	for _, m := range msgs {
		if m.Topic.Kind() != domain.TopicGroup {
			continue
		}
		k := groupKey{m.Tenant, domain.GroupID(m.Topic.GroupID())}
		if _, ok := known[k]; !ok {
			known[k] = answer{}
			byTenant[k.tenant] = append(byTenant[k.tenant], k.gid)
		}
	}
	for tenant, gids := range byTenant {
		ids, errs := many.MemberIDsMany(ctx, tenant, gids)
		for i, gid := range gids {
			known[groupKey{tenant, gid}] = answer{ids[i], errs[i]}
		}
	}
	return func(ctx context.Context, tenant domain.TenantID, gid domain.GroupID) ([]domain.UserID, error) {
		if a, ok := known[groupKey{tenant, gid}]; ok {
			return a.ids, a.err
		}
		return p.deps.Members.MemberIDs(ctx, tenant, gid)
	}
}

// Produce puts the tasks of one committed message on im.message.push and returns how many. A
// group the read model does not hold yet is looked up again later by Run (see notFoundWaits);
// Produce then returns 0. Another lookup or publish failure is logged and counted; the message's
// reminders are then lost.
func (p *Producer) Produce(ctx context.Context, m message.CommittedMessage) int {
	return p.produce(ctx, m, 1, p.deps.Members.MemberIDs)
}

func (p *Producer) produce(ctx context.Context, m message.CommittedMessage, looks int, members membersOf) int {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tasks, err := p.tasks(ctx, m, members)
	if errors.Is(err, domain.ErrNotFound) && looks <= len(notFoundWaits) {
		p.lookAgain(m, looks)
		return 0
	}
	if err != nil {
		p.deps.Metrics.Dropped.WithLabelValues("lookup_failed").Inc()
		p.log.WarnContext(ctx, "push: no reminders for a message", "tenant_id", m.Tenant.String(),
			"topic", m.Topic.String(), "seq", m.Seq, "err", err)
		return 0
	}
	if len(tasks) == 0 {
		return 0
	}
	if err := p.deps.Publisher.PublishTasks(ctx, tasks); err != nil {
		p.deps.Metrics.Dropped.WithLabelValues("publish_failed").Add(float64(len(tasks)))
		p.log.WarnContext(ctx, "push: publish tasks", "tenant_id", m.Tenant.String(),
			"topic", m.Topic.String(), "seq", m.Seq, "tasks", len(tasks), "err", err)
		return 0
	}
	p.deps.Metrics.Triggered.Add(float64(len(tasks)))
	return len(tasks)
}

// lookAgain queues m for another look once the wait after its looks-th has passed; a full
// queue drops its reminders.
func (p *Producer) lookAgain(m message.CommittedMessage, looks int) {
	time.AfterFunc(notFoundWaits[looks-1], func() {
		select {
		case p.retry <- retryItem{m: m, looks: looks + 1}:
		default:
			p.deps.Metrics.Dropped.WithLabelValues("queue_full").Inc()
		}
	})
}

// Tasks decides the tasks of one committed message without publishing them. Members subscribed
// to the conversation on this node got it in realtime and are passed over; presence is read for
// the others: a conversation whose members are all online (the common case while it is busy)
// costs at most one Redis round trip, and the mutes and reminder marks are read only for offline
// members.
func (p *Producer) Tasks(ctx context.Context, m message.CommittedMessage) ([]Task, error) {
	return p.tasks(ctx, m, p.deps.Members.MemberIDs)
}

func (p *Producer) tasks(ctx context.Context, m message.CommittedMessage, members membersOf) ([]Task, error) {
	recipients, typ, err := p.recipients(ctx, m, members)
	if err != nil || len(recipients) == 0 {
		return nil, err
	}
	if p.deps.Local != nil {
		if here := p.deps.Local.SubscribedUsers(m.Tenant, m.Topic); len(here) > 0 {
			away := recipients[:0]
			for _, u := range recipients {
				if !here[u] {
					away = append(away, u)
				}
			}
			if recipients = away; len(recipients) == 0 {
				return nil, nil
			}
		}
	}
	pres, err := p.deps.Presence.GetMany(ctx, m.Tenant, recipients)
	if err != nil {
		return nil, err
	}
	var offline []domain.UserID
	var lastSeen []time.Time
	for i, u := range recipients {
		if !pres[i].Online {
			offline = append(offline, u)
			lastSeen = append(lastSeen, pres[i].LastSeen)
		}
	}
	if len(offline) == 0 {
		return nil, nil
	}
	mentioned := map[domain.UserID]bool{}
	for _, u := range m.Head.Mentions {
		mentioned[u] = true
	}
	isMentioned := func(u domain.UserID) bool { return m.Head.MentionAll || mentioned[u] }
	muted, err := p.deps.Mutes.MutedUsers(ctx, m.Tenant, m.Topic)
	if err != nil {
		return nil, err
	}
	cands, seen := offline[:0], lastSeen[:0]
	for i, u := range offline {
		if !muted[u] || isMentioned(u) {
			cands, seen = append(cands, u), append(seen, lastSeen[i])
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	reminded, err := p.remindedAt(ctx, m, cands)
	if err != nil {
		return nil, err
	}
	tasks := make([]Task, 0, len(cands))
	for i, u := range cands {
		t := Task{Type: typ, Topic: m.Topic.String(), Seq: m.Seq, TenantID: m.Tenant, UserID: u}
		if isMentioned(u) {
			t.Type = TypeMention
		} else if r := reminded[i]; !r.IsZero() && r.After(seen[i]) {
			continue // reminded already and not back online since: stay quiet
		}
		tasks = append(tasks, t)
	}
	return tasks, nil
}

// recipients are the members of the message's conversation other than the sender.
func (p *Producer) recipients(ctx context.Context, m message.CommittedMessage, members membersOf) ([]domain.UserID, string, error) {
	if m.Topic.Kind() != domain.TopicGroup {
		peer := m.Topic.Peer(m.From)
		if peer <= 0 || peer == m.From {
			return nil, "", nil
		}
		return []domain.UserID{peer}, TypeDirectMessage, nil
	}
	ids, err := members(ctx, m.Tenant, domain.GroupID(m.Topic.GroupID()))
	if err != nil {
		return nil, "", err
	}
	out := make([]domain.UserID, 0, len(ids))
	for _, u := range ids {
		if u != m.From {
			out = append(out, u)
		}
	}
	return out, TypeGroupMessage, nil
}

// remindedAt reads when each user last got a reminder for the topic (zero: never, or no Redis
// configured).
func (p *Producer) remindedAt(ctx context.Context, m message.CommittedMessage, users []domain.UserID) ([]time.Time, error) {
	out := make([]time.Time, len(users))
	if p.deps.Redis == nil {
		return out, nil
	}
	fields := make([]string, len(users))
	for i, u := range users {
		fields[i] = u.String()
	}
	vals, err := p.deps.Redis.HMGet(ctx, p.keys.reminded(m.Tenant, m.Topic.String()), fields...).Result()
	if err != nil {
		return nil, domain.Retryable("push: read reminder marks", err)
	}
	for i, v := range vals {
		if s, ok := v.(string); ok {
			if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
				out[i] = time.UnixMilli(ms).UTC()
			}
		}
	}
	return out, nil
}

// SaramaPublisher produces tasks with a synchronous producer in one batch per message.
type SaramaPublisher struct {
	Producer sarama.SyncProducer
	Topic    string // the full name of im.message.push
}

var _ TaskPublisher = SaramaPublisher{}

// PublishTasks implements TaskPublisher.
func (s SaramaPublisher) PublishTasks(_ context.Context, tasks []Task) error {
	msgs := make([]*sarama.ProducerMessage, len(tasks))
	for i, t := range tasks {
		b, err := t.Marshal()
		if err != nil {
			return err
		}
		msgs[i] = &sarama.ProducerMessage{Topic: s.Topic, Key: sarama.StringEncoder(t.Key()), Value: sarama.ByteEncoder(b)}
	}
	return s.Producer.SendMessages(msgs)
}
