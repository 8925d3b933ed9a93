package relay

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/imledger/imledger/commands/eventstore"
)

// The relay publishes with franz-go's kgo client rather than Sarama, which the rest of imledger
// uses: each term needs a transactional producer, and Sarama's transaction manager reads its
// last error without the lock that guards writing it (IBM/sarama#2913), a data race the race
// detector reports on every takeover.

// errFenced ends a term whose producer was fenced: a newer term opened a producer with the same
// transactional id, or the producer hit an error it cannot recover from.
var errFenced = errors.New("relay: transactional producer fenced or failed")

// newProducer opens a transactional producer with Config.TransactionalID and loads its producer
// id (InitProducerId), which fences every earlier producer with that id: an open transaction of
// theirs is aborted and their later sends and commits fail. Records are partitioned like the
// Kafka Java client's default partitioner (murmur2 of the key), as the rest of imledger does.
func (r *Relay) newProducer(ctx context.Context) (*kgo.Client, error) {
	k := r.cfg.Kafka.WithDefaults()
	codec, err := compression(k.Compression)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(k.Brokers...),
		kgo.ClientID(k.ClientID),
		kgo.DialTimeout(k.DialTimeout),
		kgo.TransactionalID(r.cfg.TransactionalID),
		kgo.TransactionTimeout(r.cfg.TransactionTimeout),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerBatchMaxBytes(int32(k.MaxMessageBytes)),
		kgo.ProduceRequestTimeout(k.ProduceTimeout),
		kgo.RecordRetries(k.ProduceRetries),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(max(10_000, 2*r.cfg.BatchSize)),
	)
	if err != nil {
		return nil, fmt.Errorf("relay: transactional producer: %w", err)
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("relay: open transactional producer %q: %w", r.cfg.TransactionalID, err)
	}
	return cl, nil
}

// compression maps the kafka section's codec name to kgo's.
func compression(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("relay: unknown compression %q", name)
}

// fenced reports whether err means the producer can no longer be used: a newer producer with
// the same transactional id exists, or kgo failed it for good.
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.InvalidProducerIDMapping) ||
		errors.Is(err, kgo.ErrClientClosed)
}

// sendTxn publishes recs in one transaction and commits it. A failed transaction is aborted
// (nothing of it becomes visible to read_committed consumers) and its error returned; an error
// that means the producer was fenced wraps errFenced.
func sendTxn(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	wrap := func(err error) error {
		if fenced(err) {
			return errors.Join(errFenced, err)
		}
		return err
	}
	if err := cl.BeginTransaction(); err != nil {
		return wrap(err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		_ = cl.AbortBufferedRecords(ctx)
		if aerr := cl.EndTransaction(ctx, kgo.TryAbort); aerr != nil && !fenced(err) {
			return errors.Join(errFenced, err, aerr) // the producer's state is unknown: replace it
		}
		return wrap(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		if fenced(err) {
			return wrap(err)
		}
		// The documented retry of an unconfirmed or refused commit is an abort.
		if aerr := cl.EndTransaction(ctx, kgo.TryAbort); aerr != nil {
			return errors.Join(errFenced, err, aerr)
		}
		return err
	}
	return nil
}

// ackedOffsets returns, per partition, the offset after the last of recs the broker
// acknowledged.
func ackedOffsets(recs []*kgo.Record) []eventstore.PartitionOffset {
	type tp struct {
		topic string
		part  int32
	}
	next := map[tp]int64{}
	var order []tp
	for _, m := range recs {
		k := tp{m.Topic, m.Partition}
		if _, ok := next[k]; !ok {
			order = append(order, k)
		}
		next[k] = max(next[k], m.Offset+1)
	}
	out := make([]eventstore.PartitionOffset, len(order))
	for i, k := range order {
		out[i] = eventstore.PartitionOffset{Topic: k.topic, Partition: k.part, Next: next[k]}
	}
	return out
}

// brokerState is what a Kafka cluster holds, as far as the relay can tell.
type brokerState struct {
	clusterID string
	// ends are the end offsets (high watermarks) of the partitions asked about, keyed with Next
	// zero; a partition of a topic that no longer exists has end 0.
	ends map[eventstore.PartitionOffset]int64
}

// inspectBroker reads the cluster id and the end offsets of the partitions in offsets, with the
// term's producer client.
func inspectBroker(ctx context.Context, cl *kgo.Client, offsets []eventstore.PartitionOffset) (brokerState, error) {
	st := brokerState{ends: map[eventstore.PartitionOffset]int64{}}
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return st, fmt.Errorf("relay: read the Kafka cluster id: %w", err)
	}
	if meta.ClusterID != nil {
		st.clusterID = *meta.ClusterID
	}
	if len(offsets) == 0 {
		return st, nil
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	byTopic := map[string]int{}
	for _, o := range offsets {
		i, ok := byTopic[o.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[o.Topic] = i
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = o.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp = o.Partition, -1 // the end offset
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return st, fmt.Errorf("relay: end offsets: %w", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			k := eventstore.PartitionOffset{Topic: t.Topic, Partition: p.Partition}
			switch err := kerr.ErrorForCode(p.ErrorCode); {
			case errors.Is(err, kerr.UnknownTopicOrPartition):
				st.ends[k] = 0 // the topic (or partition) is gone, with its records
			case err != nil:
				return st, fmt.Errorf("relay: end offset of %s/%d: %w", t.Topic, p.Partition, err)
			default:
				st.ends[k] = p.Offset
			}
		}
	}
	for _, o := range offsets {
		if _, ok := st.ends[eventstore.PartitionOffset{Topic: o.Topic, Partition: o.Partition}]; !ok {
			return st, fmt.Errorf("relay: no end offset for %s/%d", o.Topic, o.Partition)
		}
	}
	return st, nil
}

// lostRecords compares what the relay recorded with what the broker holds: the broker lost
// acknowledged records (or is another cluster) when its cluster id changed or a partition ends
// before the offset after the last record it acknowledged. It returns why, or "".
func lostRecords(term eventstore.RelayTerm, st brokerState) string {
	if term.ClusterID != "" && st.clusterID != "" && term.ClusterID != st.clusterID {
		return fmt.Sprintf("the Kafka cluster id changed from %q to %q", term.ClusterID, st.clusterID)
	}
	for _, o := range term.Offsets {
		end := st.ends[eventstore.PartitionOffset{Topic: o.Topic, Partition: o.Partition}]
		if end < o.Next {
			return fmt.Sprintf("partition %s/%d ends at offset %d, before the %d records the broker acknowledged", o.Topic, o.Partition, end, o.Next)
		}
	}
	return ""
}
