package kafkabroker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Retention bounds what the broker keeps (on disk, and in memory: the index of every batch, and
// the records themselves with an in-memory data directory) without ever dropping a record a
// consumer still needs. A record goes once it is past retention — older than
// Config.RetentionTime, or beyond Config.RetentionBytes of its partition — AND every consumer
// group that consumes its topic has committed past it. A group consumes a topic when it holds
// committed offsets on the topic or a member is assigned one of its partitions; on a partition
// where such a group has committed nothing yet, it holds every record. A group stops holding
// records once the broker expires its offsets (offsets.retention.minutes, 7 days after the group
// emptied), as Kafka does. So a projector that is stopped, lagging or failing keeps its backlog
// for as long as its group lives, whatever the retention; a topic nobody consumes is simply
// trimmed.
//
// Records are deleted from the start of the partition (DeleteRecords); the segment files
// whose records are all gone are removed, which is why the broker rolls segments at
// Config.SegmentBytes. Sizes are the partition's own count of its record batches; the cut for
// RetentionBytes assumes records of the partition's mean size, so the partition keeps about
// RetentionBytes.
type retention struct {
	cluster *kfake.Cluster
	client  *kgo.Client
	cfg     Config

	mu      sync.Mutex
	samples map[partitionKey][]hwmSample // per partition, oldest first
}

type partitionKey struct {
	topic     string
	partition int32
}

// hwmSample says that the records below hwm were appended before at.
type hwmSample struct {
	at  time.Time
	hwm int64
}

// RetentionStats is what one retention pass did.
type RetentionStats struct {
	// Deleted is the number of records deleted, over every partition.
	Deleted int64
	// Held is the number of records past retention that a consumer group still holds.
	Held int64
}

// ApplyRetention runs one retention pass now (the broker also runs one every
// Config.RetentionCheck): it deletes, from every partition, the records that are past retention
// and that every consumer group of their topic has committed past. It fails if the broker cannot
// list its topics or groups; a partition it cannot trim is left as it is.
func (b *Broker) ApplyRetention(ctx context.Context) (RetentionStats, error) {
	return b.ret.apply(ctx, time.Now())
}

func (r *retention) run(ctx context.Context, logf func(string, ...any)) {
	t := time.NewTicker(r.cfg.RetentionCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if _, err := r.apply(ctx, now); err != nil && ctx.Err() == nil {
				logf("kafkabroker: retention: %v", err)
			}
		}
	}
}

func (r *retention) apply(ctx context.Context, now time.Time) (RetentionStats, error) {
	var st RetentionStats
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, r.client)
	if err != nil {
		return st, fmt.Errorf("list topics: %w", err)
	}
	groups, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, r.client)
	if err != nil {
		return st, fmt.Errorf("list groups: %w", err)
	}
	if err := kerr.ErrorForCode(groups.ErrorCode); err != nil {
		return st, fmt.Errorf("list groups: %w", err)
	}
	var infos []*kfake.GroupInfo
	for _, g := range groups.Groups {
		if info := r.cluster.GroupInfo(g.Group); info != nil {
			infos = append(infos, info)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[partitionKey]bool, len(r.samples))
	for _, t := range meta.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		for _, p := range t.Partitions {
			k := partitionKey{*t.Topic, p.Partition}
			seen[k] = true
			deleted, held := r.trim(k, infos, now)
			st.Deleted += deleted
			st.Held += held
		}
	}
	for k := range r.samples {
		if !seen[k] {
			delete(r.samples, k) // the topic was deleted
		}
	}
	return st, nil
}

// trim applies retention to one partition; r.mu is held.
func (r *retention) trim(k partitionKey, groups []*kfake.GroupInfo, now time.Time) (deleted, held int64) {
	pi := r.cluster.PartitionInfo(k.topic, k.partition)
	if pi == nil {
		return 0, 0
	}
	start, end := pi.LogStartOffset, pi.HighWatermark
	r.sample(k, now, end)
	if end <= start {
		return 0, 0
	}
	due := start // records below due are past retention
	if r.cfg.RetentionBytes >= 0 && pi.NumBytes > r.cfg.RetentionBytes {
		mean := max(pi.NumBytes/(end-start), 1)
		due = max(due, end-r.cfg.RetentionBytes/mean)
	}
	if r.cfg.RetentionTime >= 0 {
		due = max(due, r.appendedBefore(k, now.Add(-r.cfg.RetentionTime)))
	}
	cut := min(due, end)
	for _, g := range groups {
		if off, consumes := committed(g, k); consumes {
			cut = min(cut, off)
		}
	}
	if cut < due {
		held = due - max(cut, start)
	}
	if cut <= start {
		return 0, held
	}
	if err := r.cluster.DeleteRecords(k.topic, k.partition, cut); err != nil {
		return 0, held
	}
	return cut - start, held
}

// committed returns the offset group g has committed on partition k and whether g consumes the
// partition's topic at all; a group that consumes the topic but has committed nothing on k
// returns 0, holding every record.
func committed(g *kfake.GroupInfo, k partitionKey) (offset int64, consumes bool) {
	if byPart, ok := g.Commits[k.topic]; ok {
		if c, ok := byPart[k.partition]; ok {
			return c.Offset, true
		}
		return 0, true
	}
	for _, m := range g.Members {
		if _, ok := m.Assignment[k.topic]; ok {
			return 0, true
		}
	}
	return 0, false
}

// sample remembers the high watermark at now, at most a 64th of RetentionTime after the last
// sample, so a partition keeps about 64 samples.
func (r *retention) sample(k partitionKey, now time.Time, hwm int64) {
	if r.cfg.RetentionTime < 0 {
		return
	}
	s := r.samples[k]
	if n := len(s); n > 0 && (now.Sub(s[n-1].at) < r.cfg.RetentionTime/64 || s[n-1].hwm == hwm) {
		return
	}
	r.samples[k] = append(s, hwmSample{at: now, hwm: hwm})
}

// appendedBefore returns an offset below which every record of k was appended before cut, and
// drops the samples it no longer needs. It knows only what it sampled since the broker started,
// so after a restart records are kept RetentionTime longer at most.
func (r *retention) appendedBefore(k partitionKey, cut time.Time) int64 {
	s := r.samples[k]
	i := 0
	for i < len(s) && !s[i].at.After(cut) {
		i++
	}
	if i == 0 {
		return 0
	}
	off := s[i-1].hwm
	r.samples[k] = s[i-1:]
	return off
}
