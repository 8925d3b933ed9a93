package fanout

import (
	"context"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/internal/redisscript"
	"github.com/imledger/imledger/transport/presence"
)

// work sends the queued messages of its shard to the other nodes, up to MaxBatch per round trip.
func (f *Fanout) work(ctx context.Context, q chan *Message) {
	batch := make([]*Message, 0, f.cfg.MaxBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-q:
			batch = append(batch[:0], m)
		}
	fill:
		for len(batch) < f.cfg.MaxBatch {
			select {
			case m := <-q:
				batch = append(batch, m)
			default:
				break fill
			}
		}
		f.send(ctx, batch)
	}
}

// topicKey names a topic's route: its online nodes, or with channel also the nodes with channel
// sessions its messages concern.
type topicKey struct {
	tenant, topic string
	channel       bool
}

// keyOf is m's route.
func keyOf(m *Message) topicKey {
	return topicKey{m.Tenant.String(), m.Topic.String(), toChannels(m)}
}

// toChannels reports whether m goes to the per-user channel sessions of the topic's users too: a
// committed message (its conversation's last message and counters) and a recall or edit of one.
func toChannels(m *Message) bool { return m.Kind == KindData || m.Kind == KindChange }

// everyNode reports whether m goes to every node on the broadcast channel: a control message
// that ends subscriptions (see PublishControl).
func everyNode(m *Message) bool { return m.Kind == KindControl && m.Drop != DropNone }

// RouteMaxAge is how old a route read before the commit (Message.route) may be for a worker to
// send the message by it instead of reading the topic's nodes again: a session that subscribed
// since was not in it. About the time from the sequencer's allocate round trip to the commit at
// light load, with room for a slower append; a client that missed a message catches up by its
// seqs either way.
const RouteMaxAge = 50 * time.Millisecond

// routed reports whether m carries a route recent enough to send it by (see RouteMaxAge).
func routed(m *Message, now time.Time) bool {
	return !m.routedAt.IsZero() && now.Sub(m.routedAt) <= RouteMaxAge // a route of no node counts
}

// others drops this node from nodes, a list read for this call: it changes nodes.
func (f *Fanout) others(nodes []string) []string {
	return slices.DeleteFunc(nodes, func(n string) bool { return n == f.cfg.NodeID })
}

// QueueRoutes implements message.Router: it queues on b, the sequencer's allocate round trip,
// the reads of the other nodes each topic's committed messages go to (the topic's online nodes
// and those with channel sessions its messages concern, this node left out), so its worker need
// not read them after the commit. A failed read gives no route: the worker reads them then.
func (f *Fanout) QueueRoutes(b *redisscript.Batch, topics []message.TopicRef) func() []*message.Route {
	refs := make([]presence.TopicRef, len(topics))
	for i, t := range topics {
		refs[i] = presence.TopicRef{Tenant: t.Tenant, Topic: t.Topic, Channel: true}
	}
	at := time.Now() // before the read: the route is at least this fresh
	read := f.nodes.QueueNodesForTopics(b, refs)
	return func() []*message.Route {
		lists, err := read()
		if err != nil {
			f.metrics.errors.WithLabelValues("nodes").Inc()
			return nil
		}
		out := make([]*message.Route, len(lists))
		for i, l := range lists {
			out[i] = &message.Route{Nodes: f.others(l), ReadAt: at}
		}
		return out
	}
}

// send publishes one batch, in order. The node lists of all its topics are read in one round
// trip; messages for every node go on the broadcast channel, which each node reads on the same
// connection as its own channel, so they keep their place among the topic's messages.
func (f *Fanout) send(ctx context.Context, batch []*Message) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.PublishTimeout)
	defer cancel()
	targets := map[topicKey][]string{}
	var refs []presence.TopicRef
	now := time.Now()
	for _, m := range batch {
		if routed(m, now) {
			continue
		}
		k := keyOf(m)
		if _, ok := targets[k]; !ok && !everyNode(m) {
			targets[k] = nil
			refs = append(refs, presence.TopicRef{Tenant: m.Tenant, Topic: m.Topic, Channel: k.channel})
		}
	}
	if len(refs) > 0 {
		lists, err := f.nodes.NodesForTopics(ctx, refs)
		if err != nil {
			f.metrics.errors.WithLabelValues("nodes").Inc()
			f.log.WarnContext(ctx, "fanout: listing nodes failed", "topics", len(refs), "err", err)
			return
		}
		for i, r := range refs {
			targets[topicKey{r.Tenant.String(), r.Topic.String(), r.Channel}] = f.others(lists[i])
		}
	}
	n := 0
	_, err := f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, m := range batch {
			nodes := m.route
			if !routed(m, now) {
				nodes = targets[keyOf(m)]
			}
			if len(nodes) == 0 && !everyNode(m) {
				continue
			}
			payload, err := encode(m)
			if err != nil {
				f.metrics.dropped.WithLabelValues("encode").Inc()
				continue
			}
			if everyNode(m) {
				p.Publish(ctx, BroadcastChannel(f.cfg.KeyPrefix), payload)
				n++
				continue
			}
			for _, node := range nodes {
				p.Publish(ctx, Channel(f.cfg.KeyPrefix, node), payload)
				n++
			}
		}
		return nil
	})
	if err != nil {
		f.metrics.errors.WithLabelValues("publish").Inc()
		f.log.WarnContext(ctx, "fanout: publishing failed", "messages", len(batch), "err", err)
		return
	}
	f.metrics.published.Add(float64(n))
}
