package relay

import (
	"context"
	"errors"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/transport/kafka"
)

// errFenced ends a term whose producer was fenced: a newer term opened a producer with the same
// transactional id, or the producer hit an error it cannot recover from.
var errFenced = errors.New("relay: transactional producer fenced or failed")

// newProducer opens the term's transactional producer. Opening it (InitProducerId) fences every
// earlier producer with Config.TransactionalID: an open transaction of theirs is aborted and
// their later sends and commits fail.
func (r *Relay) newProducer() (sarama.SyncProducer, error) {
	sc, err := kafka.NewProducerConfig(r.cfg.Kafka)
	if err != nil {
		return nil, err
	}
	sc.Producer.Transaction.ID = r.cfg.TransactionalID
	sc.Producer.Transaction.Timeout = r.cfg.TransactionTimeout
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("relay: transactional producer config: %w", err)
	}
	p, err := sarama.NewSyncProducer(r.cfg.Kafka.Brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("relay: open transactional producer %q: %w", r.cfg.TransactionalID, err)
	}
	return p, nil
}

// sendTxn publishes pms in one transaction. A failure the producer can abort is aborted and
// returned (the batch may be sent again); a fatal one wraps errFenced.
func sendTxn(p sarama.SyncProducer, pms []*sarama.ProducerMessage) error {
	fatal := func(err error) error {
		if p.TxnStatus()&sarama.ProducerTxnFlagFatalError != 0 {
			return errors.Join(errFenced, err)
		}
		if p.TxnStatus()&sarama.ProducerTxnFlagAbortableError != 0 {
			if aerr := p.AbortTxn(); aerr != nil {
				return errors.Join(errFenced, err, aerr)
			}
		}
		return err
	}
	if err := p.BeginTxn(); err != nil {
		return fatal(err)
	}
	if err := p.SendMessages(pms); err != nil {
		return fatal(err)
	}
	if err := p.CommitTxn(); err != nil {
		return fatal(err)
	}
	return nil
}

// ackedOffsets returns, per partition, the offset after the last of pms the broker acknowledged.
func ackedOffsets(pms []*sarama.ProducerMessage) []eventstore.PartitionOffset {
	type tp struct {
		topic string
		part  int32
	}
	next := map[tp]int64{}
	var order []tp
	for _, m := range pms {
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
	// ends are the end offsets (high watermarks) of the partitions asked about; a partition of
	// a topic that no longer exists has end 0.
	ends map[eventstore.PartitionOffset]int64 // keyed with Next zeroed
}

// inspectBroker reads the cluster id and the end offsets of the partitions in offsets.
func (r *Relay) inspectBroker(ctx context.Context, offsets []eventstore.PartitionOffset) (brokerState, error) {
	sc, err := kafka.NewSaramaConfig(r.cfg.Kafka)
	if err != nil {
		return brokerState{}, err
	}
	client, err := sarama.NewClient(r.cfg.Kafka.Brokers, sc)
	if err != nil {
		return brokerState{}, fmt.Errorf("relay: connect to Kafka: %w", err)
	}
	defer client.Close()
	st := brokerState{ends: map[eventstore.PartitionOffset]int64{}}
	if st.clusterID, err = clusterID(client, sc); err != nil {
		return st, err
	}
	byLeader := map[*sarama.Broker]*sarama.OffsetRequest{}
	for _, o := range offsets {
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		k := eventstore.PartitionOffset{Topic: o.Topic, Partition: o.Partition}
		leader, err := client.Leader(o.Topic, o.Partition)
		if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			st.ends[k] = 0 // the topic (or partition) is gone, with its records
			continue
		}
		if err != nil {
			return st, fmt.Errorf("relay: leader of %s/%d: %w", o.Topic, o.Partition, err)
		}
		req := byLeader[leader]
		if req == nil {
			req = sarama.NewOffsetRequest(sc.Version)
			byLeader[leader] = req
		}
		req.AddBlock(o.Topic, o.Partition, sarama.OffsetNewest, 1)
	}
	for leader, req := range byLeader {
		resp, err := leader.GetAvailableOffsets(req)
		if err != nil {
			return st, fmt.Errorf("relay: end offsets from broker %d: %w", leader.ID(), err)
		}
		for _, o := range offsets {
			blk := resp.GetBlock(o.Topic, o.Partition)
			if blk == nil {
				continue
			}
			k := eventstore.PartitionOffset{Topic: o.Topic, Partition: o.Partition}
			switch {
			case errors.Is(blk.Err, sarama.ErrUnknownTopicOrPartition):
				st.ends[k] = 0
			case !errors.Is(blk.Err, sarama.ErrNoError):
				return st, fmt.Errorf("relay: end offset of %s/%d: %w", o.Topic, o.Partition, blk.Err)
			case req.Version == 0 && len(blk.Offsets) > 0:
				st.ends[k] = blk.Offsets[0]
			default:
				st.ends[k] = blk.Offset
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

// clusterID asks any broker for the cluster id (metadata v2 and later).
func clusterID(client sarama.Client, sc *sarama.Config) (string, error) {
	var errs []error
	for _, b := range client.Brokers() {
		if err := b.Open(sc); err != nil && !errors.Is(err, sarama.ErrAlreadyConnected) {
			errs = append(errs, err)
			continue
		}
		resp, err := b.GetMetadata(sarama.NewMetadataRequest(sc.Version, []string{}))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if resp.ClusterID == nil {
			return "", nil // too old a protocol version to tell
		}
		return *resp.ClusterID, nil
	}
	return "", fmt.Errorf("relay: read the Kafka cluster id: %w", errors.Join(errs...))
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
