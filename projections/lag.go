package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	tkafka "github.com/imledger/imledger/internal/kafka"
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
// offsets. The high watermarks are asked for once per measurement, in one request per leader,
// whatever the number of groups reading a topic.
func measureLag(client sarama.Client, admin sarama.ClusterAdmin, groups []groupTopics) ([]GroupLag, error) {
	wants := make([]map[string][]int32, len(groups))
	all := map[string][]int32{}
	for i, g := range groups {
		wants[i] = map[string][]int32{}
		for _, t := range g.topics {
			ps, err := client.Partitions(t)
			if err != nil {
				return nil, fmt.Errorf("projections: lag: partitions of %s: %w", t, err)
			}
			wants[i][t], all[t] = ps, ps
		}
	}
	highs, err := highWatermarks(client, all)
	if err != nil {
		return nil, err
	}
	out := make([]GroupLag, 0, len(groups))
	for i, g := range groups {
		lag, err := groupLag(client, admin, g.group, wants[i], highs)
		if err != nil {
			return nil, err
		}
		out = append(out, lag)
	}
	return out, nil
}

// groupLag is measureLag for one group, the partitions it reads in want.
func groupLag(client sarama.Client, admin sarama.ClusterAdmin, group string, want map[string][]int32, highs map[partitionKey]int64) (GroupLag, error) {
	lag := GroupLag{ConsumerGroup: group, Partitions: map[string]map[int32]int64{}}
	committed, err := admin.ListConsumerGroupOffsets(group, want)
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		committed, err = &sarama.OffsetFetchResponse{}, nil // nothing committed yet
	}
	if err != nil {
		return lag, fmt.Errorf("projections: lag: offsets of %s: %w", group, err)
	}
	var tails []tail
	for t, ps := range want {
		lag.Partitions[t] = map[int32]int64{}
		for _, p := range ps {
			high := highs[partitionKey{t, p}]
			from, err := resumeOffset(client, committed, t, p)
			if err != nil {
				return lag, err
			}
			behind := max(high-from, 0)
			if behind > 0 && behind <= maxMarkerTail {
				tails = append(tails, tail{topic: t, partition: p, from: from, high: high})
			}
			lag.Partitions[t][p] = behind
		}
	}
	if err := dataRecords(client, tails); err != nil {
		return lag, err
	}
	for _, tl := range tails {
		lag.Partitions[tl.topic][tl.partition] = tl.data
	}
	for _, ps := range lag.Partitions {
		for _, n := range ps {
			lag.Events += n
		}
	}
	return lag, nil
}

// partitionKey names one partition of a topic.
type partitionKey struct {
	topic     string
	partition int32
}

// highWatermarks returns the high watermark of every partition of topics, with one ListOffsets
// request per leader.
func highWatermarks(client sarama.Client, topics map[string][]int32) (map[partitionKey]int64, error) {
	reqs := map[*sarama.Broker]*sarama.OffsetRequest{}
	asked := map[*sarama.Broker][]partitionKey{}
	for t, ps := range topics {
		for _, p := range ps {
			leader, err := client.Leader(t, p)
			if err != nil {
				return nil, fmt.Errorf("projections: lag: leader of %s/%d: %w", t, p, err)
			}
			if reqs[leader] == nil {
				reqs[leader] = sarama.NewOffsetRequest(client.Config().Version)
			}
			reqs[leader].AddBlock(t, p, sarama.OffsetNewest, 1)
			asked[leader] = append(asked[leader], partitionKey{t, p})
		}
	}
	out := map[partitionKey]int64{}
	for leader, req := range reqs {
		resp, err := leader.GetAvailableOffsets(req)
		if err != nil {
			return nil, fmt.Errorf("projections: lag: high watermarks from broker %d: %w", leader.ID(), err)
		}
		for _, k := range asked[leader] {
			b := resp.GetBlock(k.topic, k.partition)
			if b == nil {
				return nil, fmt.Errorf("projections: lag: high watermark of %s/%d: %w", k.topic, k.partition, sarama.ErrIncompleteResponse)
			}
			if !errors.Is(b.Err, sarama.ErrNoError) || len(b.Offsets) != 1 {
				return nil, fmt.Errorf("projections: lag: high watermark of %s/%d: %v", k.topic, k.partition, b.Err)
			}
			out[k] = b.Offsets[0]
		}
	}
	return out, nil
}

// resumeOffset returns the offset the group resumes a partition from: its committed offset, else
// the oldest retained one.
func resumeOffset(client sarama.Client, committed *sarama.OffsetFetchResponse, topic string, p int32) (int64, error) {
	if b := committed.GetBlock(topic, p); b != nil && b.Offset >= 0 {
		return b.Offset, nil
	}
	from, err := client.GetOffset(topic, p, sarama.OffsetOldest)
	if err != nil {
		return 0, fmt.Errorf("projections: lag: oldest offset of %s/%d: %w", topic, p, err)
	}
	return from, nil
}

// tail is a short range [from, high) of a partition that may hold only transaction markers;
// data is how many data records it holds.
type tail struct {
	topic     string
	partition int32
	from      int64
	high      int64
	data      int64
}

// maxMarkerTail is the longest gap between a committed offset and the high watermark that
// dataRecords checks for transaction markers.
const maxMarkerTail = 4

// dataRecords counts the committed data records of each tail, with one fetch per leader. The
// relay publishes in transactions, and each commit leaves a marker record that consumers never
// see: a group that applied everything still has its committed offset one short of the high
// watermark, which is no lag. A tail that cannot be read counts every offset.
func dataRecords(client sarama.Client, tails []tail) error {
	byLeader := map[*sarama.Broker][]int{}
	for i := range tails {
		tl := &tails[i]
		tl.data = tl.high - tl.from
		leader, err := client.Leader(tl.topic, tl.partition)
		if err != nil {
			return fmt.Errorf("projections: lag: leader of %s/%d: %w", tl.topic, tl.partition, err)
		}
		byLeader[leader] = append(byLeader[leader], i)
	}
	for leader, idx := range byLeader {
		req := &sarama.FetchRequest{Version: 4, MaxWaitTime: 0, MinBytes: 0, MaxBytes: 4 << 20, Isolation: sarama.ReadCommitted}
		for _, i := range idx {
			req.AddBlock(tails[i].topic, tails[i].partition, tails[i].from, 64<<10, -1)
		}
		resp, err := leader.Fetch(req)
		if err != nil {
			return fmt.Errorf("projections: lag: fetch from broker %d: %w", leader.ID(), err)
		}
		for _, i := range idx {
			tl := &tails[i]
			block := resp.GetBlock(tl.topic, tl.partition)
			if block == nil || block.Err != sarama.ErrNoError || len(block.AbortedTransactions) > 0 {
				continue
			}
			var n int64
			for _, rs := range block.RecordsSet {
				if rs == nil || rs.RecordBatch == nil || rs.RecordBatch.Control {
					continue
				}
				b := rs.RecordBatch
				for _, r := range b.Records {
					if o := b.FirstOffset + r.OffsetDelta; o >= tl.from && o < tl.high {
						n++
					}
				}
			}
			tl.data = n
		}
	}
	return nil
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
// from their committed offsets, wherever the projectors run (Seconds stays 0). A projector
// commits what it applied within about 50 ms (PipelinedSubscriberConfig.CommitDelay), so a group
// that keeps up shows at most that much of events.
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
