package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	tkafka "github.com/imledger/imledger/transport/kafka"
)

// GroupLag is how far one consumer group is behind.
type GroupLag struct {
	ConsumerGroup string
	// Events is the sum over the group's partitions of high watermark − committed offset. A
	// partition without a committed offset counts from its oldest retained offset.
	Events int64
	// Seconds is now − occurred_at of the newest event the group applied in this process, or 0
	// when Events is 0.
	Seconds float64
	// Partitions is the events behind per topic and partition.
	Partitions map[string]map[int32]int64
}

// groupTopics is a consumer group with the full names of the topics it consumes.
type groupTopics struct {
	group  string
	topics []string
}

// measureLag computes the lag of each group from the brokers' high watermarks and committed
// offsets.
func measureLag(client sarama.Client, admin sarama.ClusterAdmin, groups []groupTopics) ([]GroupLag, error) {
	out := make([]GroupLag, 0, len(groups))
	for _, g := range groups {
		lag := GroupLag{ConsumerGroup: g.group, Partitions: map[string]map[int32]int64{}}
		want := map[string][]int32{}
		for _, t := range g.topics {
			ps, err := client.Partitions(t)
			if err != nil {
				return nil, fmt.Errorf("projections: lag: partitions of %s: %w", t, err)
			}
			want[t] = ps
		}
		committed, err := admin.ListConsumerGroupOffsets(g.group, want)
		if errors.Is(err, sarama.ErrGroupIDNotFound) {
			committed, err = &sarama.OffsetFetchResponse{}, nil // nothing committed yet
		}
		if err != nil {
			return nil, fmt.Errorf("projections: lag: offsets of %s: %w", g.group, err)
		}
		for t, ps := range want {
			lag.Partitions[t] = map[int32]int64{}
			for _, p := range ps {
				behind, err := partitionLag(client, committed, t, p)
				if err != nil {
					return nil, err
				}
				lag.Partitions[t][p] = behind
				lag.Events += behind
			}
		}
		out = append(out, lag)
	}
	return out, nil
}

func partitionLag(client sarama.Client, committed *sarama.OffsetFetchResponse, topic string, p int32) (int64, error) {
	high, err := client.GetOffset(topic, p, sarama.OffsetNewest)
	if err != nil {
		return 0, fmt.Errorf("projections: lag: high watermark of %s/%d: %w", topic, p, err)
	}
	from := int64(-1)
	if b := committed.GetBlock(topic, p); b != nil {
		from = b.Offset
	}
	if from < 0 {
		if from, err = client.GetOffset(topic, p, sarama.OffsetOldest); err != nil {
			return 0, fmt.Errorf("projections: lag: oldest offset of %s/%d: %w", topic, p, err)
		}
	}
	if high <= from {
		return 0, nil
	}
	if high-from <= maxMarkerTail {
		return dataRecords(client, topic, p, from, high)
	}
	return high - from, nil
}

// maxMarkerTail is the longest gap between a committed offset and the high watermark that
// dataRecords checks for transaction markers.
const maxMarkerTail = 4

// dataRecords counts the committed data records of a partition in [from, high). The relay
// publishes in transactions, and each commit leaves a marker record that consumers never see:
// a group that applied everything still has its committed offset one short of the high
// watermark, which is no lag.
func dataRecords(client sarama.Client, topic string, p int32, from, high int64) (int64, error) {
	leader, err := client.Leader(topic, p)
	if err != nil {
		return 0, fmt.Errorf("projections: lag: leader of %s/%d: %w", topic, p, err)
	}
	req := &sarama.FetchRequest{Version: 4, MaxWaitTime: 0, MinBytes: 0, MaxBytes: 1 << 20, Isolation: sarama.ReadCommitted}
	req.AddBlock(topic, p, from, 1<<20, -1)
	resp, err := leader.Fetch(req)
	if err != nil {
		return 0, fmt.Errorf("projections: lag: fetch %s/%d: %w", topic, p, err)
	}
	block := resp.GetBlock(topic, p)
	if block == nil || block.Err != sarama.ErrNoError {
		return high - from, nil // cannot tell: count every offset
	}
	aborted := len(block.AbortedTransactions) > 0
	var n int64
	for _, rs := range block.RecordsSet {
		if rs == nil || rs.RecordBatch == nil {
			continue
		}
		b := rs.RecordBatch
		if b.Control {
			continue
		}
		for _, r := range b.Records {
			if o := b.FirstOffset + r.OffsetDelta; o >= from && o < high {
				n++
			}
		}
	}
	if aborted && n > 0 {
		return high - from, nil
	}
	return n, nil
}

// lagLoop measures lag every interval and sets the lag gauges until ctx ends.
func (p *Projector) lagLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := p.Lag(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("measure projection lag", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Lag measures how far each consumer group of the projector is behind and updates the lag
// gauges. It connects to the brokers for each call; it fails if they do not answer.
func (p *Projector) Lag(ctx context.Context) ([]GroupLag, error) {
	lags, err := measureGroups(ctx, p.cfg, p.projections)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for i := range lags {
		l := &lags[i]
		l.Seconds = p.metrics.secondsBehind(l.ConsumerGroup, l.Events, now)
		p.metrics.lagEvents.WithLabelValues(l.ConsumerGroup).Set(float64(l.Events))
		p.metrics.lagSeconds.WithLabelValues(l.ConsumerGroup).Set(l.Seconds)
	}
	return lags, nil
}

// LagOf measures how far the consumer groups of projections are behind on the brokers of cfg,
// from their committed offsets, wherever the projectors run (Seconds stays 0). Offsets are
// committed about once a second, so a group that keeps up may show up to a second of events.
func LagOf(ctx context.Context, cfg Config, projections ...Projection) ([]GroupLag, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	return measureGroups(ctx, cfg, projections)
}

func measureGroups(ctx context.Context, cfg Config, projections []Projection) ([]GroupLag, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sc, err := tkafka.NewSaramaConfig(cfg.Kafka)
	if err != nil {
		return nil, err
	}
	client, err := sarama.NewClient(cfg.Kafka.Brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("projections: lag: connect: %w", err)
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("projections: lag: cluster admin: %w", err)
	}
	defer admin.Close() // closes client too
	var groups []groupTopics
	for _, pr := range projections {
		g := groupTopics{group: pr.ConsumerGroup}
		for _, t := range pr.Topics {
			g.topics = append(g.topics, cfg.Kafka.Topic(t))
		}
		groups = append(groups, g)
	}
	return measureLag(client, admin, groups)
}
