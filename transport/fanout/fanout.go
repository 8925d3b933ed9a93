package fanout

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/internal/coalesce"
	"github.com/imledger/imledger/internal/redisscript"
	"github.com/imledger/imledger/transport/presence"
)

// Deliverer hands a message to this node's online sessions of its topic. It must not block:
// it runs on the sender's and the receiver's path.
type Deliverer interface {
	Deliver(m *Message)
}

// NodeFinder lists the nodes with online members of topics, nodes[i] for refs[i], in one round
// trip, its own or, queued, another caller's (transport/presence implements it).
type NodeFinder interface {
	NodesForTopics(ctx context.Context, refs []presence.TopicRef) (nodes [][]string, err error)
	QueueNodesForTopics(b *redisscript.Batch, refs []presence.TopicRef) (read func() ([][]string, error))
}

// Deps are the collaborators of a Fanout.
type Deps struct {
	Redis      redis.UniversalClient // required
	Nodes      NodeFinder            // required
	Local      Deliverer             // required: this node's sessions
	Logger     *slog.Logger          // default discards
	Registerer prometheus.Registerer // optional
}

// Fanout delivers messages to a topic's online sessions on every node.
//
// Guarantees: a published message is delivered to this node's sessions at once, and sent at
// most once to each other node that presence lists for the topic when its worker gets to it; a
// control message that ends subscriptions is sent to every node instead (see PublishControl).
// Messages of one topic published on one node leave, and arrive, in Publish order. Nothing is
// retried: a message dropped on a full queue, a Redis error or a node's missed subscription is
// lost for realtime delivery, and clients catch up with a history query after their last seq.
type Fanout struct {
	cfg     Config
	rdb     redis.UniversalClient
	nodes   NodeFinder
	local   Deliverer
	log     *slog.Logger
	metrics *metrics

	queues []chan *Message
	mu     sync.RWMutex // guards closed against sends on closed queues
	closed bool
	cancel context.CancelFunc
	pubsub *redis.PubSub
	wg     sync.WaitGroup

	broadcasts coalesce.Group[*broadcastCall]
}

// New validates cfg and returns a Fanout; Start makes it run.
func New(deps Deps, cfg Config) (*Fanout, error) {
	cfg.setDefaults()
	var errs []error
	if deps.Redis == nil || deps.Nodes == nil || deps.Local == nil {
		errs = append(errs, errors.New("fanout: Redis, Nodes and Local are required"))
	}
	errs = append(errs, cfg.Validate())
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(deps.Registerer)
	if err != nil {
		return nil, err
	}
	f := &Fanout{cfg: cfg, rdb: deps.Redis, nodes: deps.Nodes, local: deps.Local, log: deps.Logger, metrics: m}
	f.broadcasts.Run = f.publishBroadcasts
	for range cfg.Workers {
		f.queues = append(f.queues, make(chan *Message, cfg.QueueSize))
	}
	return f, nil
}

// Start subscribes to this node's channel, waits until Redis confirmed the subscription, and
// starts the workers and the receiver. They run until ctx ends or Close is called. Start fails
// when Redis does not confirm the subscription; the Pub/Sub connection reconnects by itself
// afterwards, and messages sent while it is down are lost.
func (f *Fanout) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	ps := f.rdb.Subscribe(ctx, Channel(f.cfg.KeyPrefix, f.cfg.NodeID), BroadcastChannel(f.cfg.KeyPrefix))
	for range 2 { // one confirmation per channel
		if _, err := ps.Receive(ctx); err != nil {
			cancel()
			_ = ps.Close()
			return fmt.Errorf("fanout: subscribe: %w", err)
		}
	}
	f.cancel, f.pubsub = cancel, ps
	ch := ps.Channel(redis.WithChannelSize(f.cfg.ReceiveBuffer))
	f.wg.Add(1 + len(f.queues))
	go func() {
		defer f.wg.Done()
		f.receive(ctx, ch)
	}()
	for _, q := range f.queues {
		go func() {
			defer f.wg.Done()
			f.work(ctx, q)
		}()
	}
	return nil
}

// Publish delivers m to this node's sessions now and queues it for the other nodes. It never
// blocks; see Fanout for what it guarantees.
func (f *Fanout) Publish(m *Message) {
	f.local.Deliver(m)
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		f.metrics.dropped.WithLabelValues("closed").Inc()
		return
	}
	select {
	case f.queues[f.shard(m)] <- m:
	default:
		f.metrics.dropped.WithLabelValues("queue_full").Inc()
	}
}

// PublishControl delivers a KindControl message like Publish, except that a full queue makes it
// wait for room, until ctx ends or PublishTimeout passes, instead of dropping the message: a
// lost removal would leave a removed user subscribed on other nodes. It keeps Publish's order
// within the topic. A message that ends subscriptions (Drop) goes to every node, not only to
// those presence lists for the topic: a node whose session is subscribing while the change
// commits is not listed yet, and must still hear of it to refuse or end that subscription. It
// fails when the wait ended, or the Fanout is closed; the message was then delivered on this
// node only.
func (f *Fanout) PublishControl(ctx context.Context, m *Message) error {
	if everyNode(m) {
		m.Origin = f.cfg.NodeID
	}
	f.local.Deliver(m)
	ctx, cancel := context.WithTimeout(ctx, f.cfg.PublishTimeout)
	defer cancel()
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		f.metrics.dropped.WithLabelValues("closed").Inc()
		return errors.New("fanout: closed")
	}
	select {
	case f.queues[f.shard(m)] <- m:
		return nil
	case <-ctx.Done():
		f.metrics.dropped.WithLabelValues("queue_full").Inc()
		return fmt.Errorf("fanout: queue full: %w", ctx.Err())
	}
}

// Broadcast delivers a KindAccount message to this node's sessions now and publishes it to
// every node of the deployment on the broadcast channel, waiting up to PublishTimeout for Redis.
// It fails when Redis did not take the message; it was then delivered on this node only. Like
// every Pub/Sub message it reaches only the nodes subscribed at the time.
func (f *Fanout) Broadcast(ctx context.Context, m *Message) error {
	m.Origin = f.cfg.NodeID
	f.local.Deliver(m)
	payload, err := encodeBroadcast(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.PublishTimeout)
	defer cancel()
	call := &broadcastCall{payload: payload}
	if err := f.broadcasts.Do(ctx, call); err != nil {
		call.err = err
	}
	if call.err != nil {
		f.metrics.errors.WithLabelValues("publish").Inc()
		return fmt.Errorf("fanout: broadcast: %w", call.err)
	}
	f.metrics.published.Inc()
	return nil
}

// Routed is a message and the nodes it goes to.
type Routed struct {
	Message *Message
	Nodes   []string
}

// PublishNodes delivers each message to its nodes: to this node's sessions at once when it is
// among them, and to the others over their channels, all in one Redis round trip, waiting up to
// PublishTimeout. It is for messages whose nodes the caller already knows, such as KindUser
// items, which go to the nodes with a channel session of their user as the channel log read them
// when it appended the items. It fails when Redis did not take the messages; then only this
// node delivered them. Like every Pub/Sub message they reach only the nodes subscribed at the
// time.
func (f *Fanout) PublishNodes(ctx context.Context, routed ...Routed) error {
	type out struct {
		node    string
		payload []byte
	}
	var outs []out
	for _, r := range routed {
		var payload []byte
		var seen []string
		for _, n := range r.Nodes {
			if slices.Contains(seen, n) {
				continue
			}
			seen = append(seen, n)
			if n == f.cfg.NodeID {
				f.local.Deliver(r.Message)
				continue
			}
			if payload == nil {
				var err error
				if payload, err = encode(r.Message); err != nil {
					return err
				}
			}
			outs = append(outs, out{n, payload})
		}
	}
	if len(outs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.PublishTimeout)
	defer cancel()
	_, err := f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, o := range outs {
			p.Publish(ctx, Channel(f.cfg.KeyPrefix, o.node), o.payload)
		}
		return nil
	})
	if err != nil {
		f.metrics.errors.WithLabelValues("publish").Inc()
		return fmt.Errorf("fanout: publish to nodes: %w", err)
	}
	f.metrics.published.Add(float64(len(outs)))
	return nil
}

// broadcastCall is one Broadcast's PUBLISH in a round of Fanout.broadcasts: the broadcasts made
// while one is on its way to Redis (an admin system banning users one command each) go in one
// pipeline, one round trip.
type broadcastCall struct {
	payload []byte
	err     error
}

func (f *Fanout) publishBroadcasts(ctx context.Context, round []*broadcastCall) {
	channel := BroadcastChannel(f.cfg.KeyPrefix)
	if len(round) == 1 {
		round[0].err = f.rdb.Publish(ctx, channel, round[0].payload).Err()
		return
	}
	pipe := f.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(round))
	for i, c := range round {
		cmds[i] = pipe.Publish(ctx, channel, c.payload)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for i, c := range round {
		c.err = cmds[i].Err()
	}
}

// PublishBroadcast publishes a KindAccount message on the broadcast channel of the deployment
// whose key prefix is keyPrefix, for a process that runs no Fanout (an operator command): every
// node delivers it, m.Origin's node excepted.
func PublishBroadcast(ctx context.Context, rdb redis.UniversalClient, keyPrefix string, m *Message) error {
	payload, err := encodeBroadcast(m)
	if err != nil {
		return err
	}
	if err := rdb.Publish(ctx, BroadcastChannel(keyPrefix), payload).Err(); err != nil {
		return fmt.Errorf("fanout: broadcast: %w", err)
	}
	return nil
}

// encodeBroadcast encodes a message for the broadcast channel: only account messages go there.
func encodeBroadcast(m *Message) ([]byte, error) {
	if m.Kind != KindAccount || m.Account == nil {
		return nil, errors.New("fanout: only account messages are broadcast")
	}
	return encode(m)
}

func (f *Fanout) shard(m *Message) int {
	h := fnv.New32a()
	h.Write([]byte(m.Tenant.String()))
	h.Write([]byte{0})
	h.Write([]byte(m.Topic.String()))
	return int(h.Sum32() % uint32(len(f.queues)))
}

// receive delivers the messages other nodes sent to this node.
func (f *Fanout) receive(ctx context.Context, ch <-chan *redis.Message) {
	for {
		select {
		case <-ctx.Done():
			return
		case rm, ok := <-ch:
			if !ok {
				return
			}
			m, err := decode([]byte(rm.Payload))
			if err != nil {
				f.metrics.dropped.WithLabelValues("bad_payload").Inc()
				f.log.WarnContext(ctx, "fanout: dropping a message", "err", err)
				continue
			}
			if m.Origin == f.cfg.NodeID {
				continue // this node delivered its own broadcast when it sent it
			}
			f.metrics.received.Inc()
			f.local.Deliver(m)
		}
	}
}

// Close stops the workers and the receiver and waits for them. Queued messages are dropped.
// Close is idempotent.
func (f *Fanout) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.mu.Unlock()
	var err error
	if f.cancel != nil {
		f.cancel()
		err = f.pubsub.Close()
	}
	f.wg.Wait()
	return err
}
