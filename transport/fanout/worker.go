package fanout

import (
	"context"
	"slices"

	"github.com/redis/go-redis/v9"
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

type topicKey struct{ tenant, topic string }

// send publishes one batch. Node lists are read once per topic of the batch.
func (f *Fanout) send(ctx context.Context, batch []*Message) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.PublishTimeout)
	defer cancel()
	targets := map[topicKey][]string{}
	for _, m := range batch {
		k := topicKey{m.Tenant.String(), m.Topic.String()}
		if _, ok := targets[k]; ok {
			continue
		}
		nodes, err := f.nodes.NodesForTopic(ctx, m.Tenant, m.Topic)
		if err != nil {
			f.metrics.errors.WithLabelValues("nodes").Inc()
			f.log.WarnContext(ctx, "fanout: listing nodes failed", "tenant_id", m.Tenant.String(), "topic", m.Topic.String(), "err", err)
		}
		targets[k] = slices.DeleteFunc(nodes, func(n string) bool { return n == f.cfg.NodeID })
	}
	n := 0
	_, err := f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, m := range batch {
			nodes := targets[topicKey{m.Tenant.String(), m.Topic.String()}]
			if len(nodes) == 0 {
				continue
			}
			payload, err := encode(m)
			if err != nil {
				f.metrics.dropped.WithLabelValues("encode").Inc()
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
