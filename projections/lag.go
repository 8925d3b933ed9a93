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
// offsets. The high watermarks, and the oldest offsets of the partitions a group has committed
// nothing on, are asked for once per measurement, in one request per leader each, whatever the
// number of groups and partitions.
func measureLag(client sarama.Client, admin sarama.ClusterAdmin, groups []groupTopics) ([]GroupLag, error) {
	wants := make([]map[string][]int32, len(groups))
	var all []partitionKey
	seen := map[string]bool{}
	for i, g := range groups {
		wants[i] = map[string][]int32{}
		for _, t := range g.topics {
			ps, err := client.Partitions(t)
			if err != nil {
				return nil, fmt.Errorf("projections: lag: partitions of %s: %w", t, err)
			}
			wants[i][t] = ps
			if !seen[t] {
				seen[t] = true
				for _, p := range ps {
					all = append(all, partitionKey{t, p})
				}
			}
		}
	}
	highs, err := listOffsets(client, all, sarama.OffsetNewest)
	if err != nil {
		return nil, err
	}
	committed := make([]*sarama.OffsetFetchResponse, len(groups))
	var uncommitted []partitionKey // partitions with records that some group never committed on
	asked := map[partitionKey]bool{}
	for i, g := range groups {
		committed[i], err = committedOffsets(admin, g.group, wants[i])
		if err != nil {
			return nil, err
		}
		for t, ps := range wants[i] {
			for _, p := range ps {
				k := partitionKey{t, p}
				if _, ok := committedAt(committed[i], t, p); !ok && highs[k] > 0 && !asked[k] {
					asked[k] = true
					uncommitted = append(uncommitted, k)
				}
			}
		}
	}
	oldest, err := listOffsets(client, uncommitted, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	out := make([]GroupLag, 0, len(groups))
	for i, g := range groups {
		lag, err := groupLag(client, g.group, wants[i], committed[i], highs, oldest)
		if err != nil {
			return nil, err
		}
		out = append(out, lag)
	}
	return out, nil
}

// committedOffsets returns the offsets group committed on the partitions of want.
func committedOffsets(admin sarama.ClusterAdmin, group string, want map[string][]int32) (*sarama.OffsetFetchResponse, error) {
	committed, err := admin.ListConsumerGroupOffsets(group, want)
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		return &sarama.OffsetFetchResponse{}, nil // nothing committed yet
	}
	if err != nil {
		return nil, fmt.Errorf("projections: lag: offsets of %s: %w", group, err)
	}
	return committed, nil
}

// committedAt returns the offset committed on a partition, ok false when there is none.
func committedAt(committed *sarama.OffsetFetchResponse, topic string, partition int32) (int64, bool) {
	if b := committed.GetBlock(topic, partition); b != nil && b.Offset >= 0 {
		return b.Offset, true
	}
	return 0, false
}

// groupLag is measureLag for one group, the partitions it reads in want. A partition the group
// committed nothing on resumes from its oldest retained offset (oldest; absent when it is empty).
func groupLag(client sarama.Client, group string, want map[string][]int32, committed *sarama.OffsetFetchResponse,
	highs, oldest map[partitionKey]int64) (GroupLag, error) {
	lag := GroupLag{ConsumerGroup: group, Partitions: map[string]map[int32]int64{}}
	var tails []tail
	for t, ps := range want {
		lag.Partitions[t] = map[int32]int64{}
		for _, p := range ps {
			k := partitionKey{t, p}
			high, from := highs[k], oldest[k]
			if at, ok := committedAt(committed, t, p); ok {
				from = at
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

// listOffsets returns the offset at (sarama.OffsetNewest: the high watermark; OffsetOldest: the
// oldest retained) of every partition of keys, with one ListOffsets request per leader.
func listOffsets(client sarama.Client, keys []partitionKey, at int64) (map[partitionKey]int64, error) {
	what := "high watermark"
	if at == sarama.OffsetOldest {
		what = "oldest offset"
	}
	reqs := map[*sarama.Broker]*sarama.OffsetRequest{}
	asked := map[*sarama.Broker][]partitionKey{}
	for _, k := range keys {
		leader, err := client.Leader(k.topic, k.partition)
		if err != nil {
			return nil, fmt.Errorf("projections: lag: leader of %s/%d: %w", k.topic, k.partition, err)
		}
		if reqs[leader] == nil {
			reqs[leader] = sarama.NewOffsetRequest(client.Config().Version)
		}
		reqs[leader].AddBlock(k.topic, k.partition, at, 1)
		asked[leader] = append(asked[leader], k)
	}
	out := make(map[partitionKey]int64, len(keys))
	for leader, req := range reqs {
		resp, err := leader.GetAvailableOffsets(req)
		if err != nil {
			return nil, fmt.Errorf("projections: lag: %ss from broker %d: %w", what, leader.ID(), err)
		}
		for _, k := range asked[leader] {
			b := resp.GetBlock(k.topic, k.partition)
			if b == nil {
				return nil, fmt.Errorf("projections: lag: %s of %s/%d: %w", what, k.topic, k.partition, sarama.ErrIncompleteResponse)
			}
			if !errors.Is(b.Err, sarama.ErrNoError) || len(b.Offsets) != 1 {
				return nil, fmt.Errorf("projections: lag: %s of %s/%d: %v", what, k.topic, k.partition, b.Err)
			}
			out[k] = b.Offsets[0]
		}
	}
	return out, nil
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

// lagLoop measures lag every interval and sets the lag gauges until ctx ends. Its measurements
// share one connection (see lagMeter).
func (p *Projector) lagLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	m := &lagMeter{cfg: p.cfg}
	defer m.close()
	for {
		if _, err := p.record(m.measure(ctx, p.projections)); err != nil && ctx.Err() == nil {
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
	return p.record(measureGroups(ctx, p.cfg, p.projections))
}

// record completes lags with the seconds behind and sets the lag gauges.
func (p *Projector) record(lags []GroupLag, err error) ([]GroupLag, error) {
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
// commits what it applied within about 200 ms (PipelinedSubscriberConfig.CommitDelay), so a group
// that keeps up shows at most that much of events.
func LagOf(ctx context.Context, cfg Config, projections ...Projection) ([]GroupLag, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	return measureGroups(ctx, cfg, projections)
}

// measureGroups measures the lag of projections over a connection of its own.
func measureGroups(ctx context.Context, cfg Config, projections []Projection) ([]GroupLag, error) {
	m := &lagMeter{cfg: cfg}
	defer m.close()
	return m.measure(ctx, projections)
}

// lagMeter measures lag over one connection to the brokers, opened by the first measurement and
// kept for the next ones: a node measures every Config.LagInterval, and a new client each time
// would ask the brokers for their versions, metadata and group coordinators again. A failed
// measurement closes the connection; the next one opens another. Not safe for concurrent use.
type lagMeter struct {
	cfg    Config
	client sarama.Client
	admin  sarama.ClusterAdmin
}

func (m *lagMeter) measure(ctx context.Context, projections []Projection) ([]GroupLag, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if m.admin == nil {
		sc, err := tkafka.NewSaramaConfig(m.cfg.Kafka)
		if err != nil {
			return nil, err
		}
		client, err := sarama.NewClient(m.cfg.Kafka.Brokers, sc)
		if err != nil {
			return nil, fmt.Errorf("projections: lag: connect: %w", err)
		}
		admin, err := sarama.NewClusterAdminFromClient(client)
		if err != nil {
			_ = client.Close()
			return nil, fmt.Errorf("projections: lag: cluster admin: %w", err)
		}
		m.client, m.admin = client, admin
	}
	var groups []groupTopics
	for _, pr := range projections {
		g := groupTopics{group: pr.ConsumerGroup}
		for _, t := range pr.Topics {
			g.topics = append(g.topics, m.cfg.Kafka.Topic(t))
		}
		groups = append(groups, g)
	}
	lags, err := measureLag(m.client, m.admin, groups)
	if err != nil {
		m.close()
	}
	return lags, err
}

// close closes the connection, if open.
func (m *lagMeter) close() {
	if m.admin != nil {
		_ = m.admin.Close() // closes the client too
		m.client, m.admin = nil, nil
	}
}
