package kafkabroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cleanMark is the file Close leaves in the data directory once the broker's state is saved; its
// absence at Start, beside a log, means the last broker on the directory did not close (it was
// killed or crashed).
const cleanMark = "imledger-closed-cleanly"

// Dangling transactions. A broker killed while a transactional producer had a transaction open
// leaves that transaction's records in the log with no commit or abort marker after them. On
// reload kfake counts such a transaction as aborted in its own index but writes no marker, and a
// read_committed consumer that reaches the transaction then skips every later batch of the same
// producer id until it sees an abort marker of that producer. A transactional producer that comes
// back with the same transactional id (the relay does) gets the same producer id, so every
// transaction it commits after the restart would be skipped by every consumer, for good. Kafka's
// transaction coordinator writes the abort markers of the transactions it times out; this is that
// step for the embedded broker: once, after a start that followed a crash, and before any client
// other than the broker's own can have produced.

// danglingTxn is the open transaction of one producer in one partition.
type danglingTxn struct {
	topic     string
	partition int32
	producer  int64
	epoch     int16
}

// abortDangling finds every transaction the log holds open and writes an abort marker for it,
// returning how many it closed.
func abortDangling(ctx context.Context, c *kfake.Cluster, addrs []string, cl *kgo.Client) (int, error) {
	open, err := findDangling(ctx, c, addrs, cl)
	if err != nil || len(open) == 0 {
		return 0, err
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	for _, d := range open {
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = d.producer, d.epoch, false
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = d.topic, []int32{d.partition}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("kafkabroker: abort dangling transactions: %w", err)
	}
	var errs []error
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					errs = append(errs, fmt.Errorf("kafkabroker: abort marker of producer %d on %s/%d: %w", m.ProducerID, t.Topic, p.Partition, err))
				}
			}
		}
	}
	return len(open), errors.Join(errs...)
}

// findDangling reads every partition from its start to its end (as the cluster reports them),
// control records included, and returns the transactions whose records are not followed by a
// marker of their producer.
func findDangling(ctx context.Context, c *kfake.Cluster, addrs []string, cl *kgo.Client) ([]danglingTxn, error) {
	offsets, ends, err := logRanges(ctx, c, cl)
	if err != nil || len(ends) == 0 {
		return nil, err
	}
	reader, err := kgo.NewClient(kgo.SeedBrokers(addrs...),
		kgo.ConsumePartitions(offsets), kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords(), kgo.WithLogger(nil))
	if err != nil {
		return nil, fmt.Errorf("kafkabroker: read the log: %w", err)
	}
	defer reader.Close()
	scan := txnScan{ends: ends, left: len(ends), state: map[partitionKey]map[int64]*txnState{}, done: map[partitionKey]bool{}}
	for scan.left > 0 {
		fs := reader.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("kafkabroker: read the log: %d partitions not read to their end: %w", scan.left, err)
		}
		var fetchErr error
		fs.EachError(func(t string, p int32, err error) {
			fetchErr = errors.Join(fetchErr, fmt.Errorf("%s/%d: %w", t, p, err))
		})
		if fetchErr != nil {
			return nil, fmt.Errorf("kafkabroker: read the log: %w", fetchErr)
		}
		fs.EachRecord(scan.record)
	}
	return scan.open(), nil
}

// logRanges answers, of every partition that holds records, the offset of its first record to
// consume from and the end of its log.
func logRanges(ctx context.Context, c *kfake.Cluster, cl *kgo.Client) (map[string]map[int32]kgo.Offset, map[partitionKey]int64, error) {
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, fmt.Errorf("kafkabroker: list topics: %w", err)
	}
	ends := map[partitionKey]int64{}
	offsets := map[string]map[int32]kgo.Offset{}
	for _, t := range meta.Topics {
		if t.Topic == nil {
			continue
		}
		for _, p := range t.Partitions {
			pi := c.PartitionInfo(*t.Topic, p.Partition)
			if pi == nil || pi.LogStartOffset >= pi.HighWatermark {
				continue
			}
			if offsets[*t.Topic] == nil {
				offsets[*t.Topic] = map[int32]kgo.Offset{}
			}
			offsets[*t.Topic][p.Partition] = kgo.NewOffset().At(pi.LogStartOffset)
			ends[partitionKey{*t.Topic, p.Partition}] = pi.HighWatermark
		}
	}
	return offsets, ends, nil
}

// txnState is whether a producer's transaction is open in a partition, and its epoch.
type txnState struct {
	open  bool
	epoch int16
}

// txnScan follows the transactions of every producer in each partition read up to its end;
// left counts the partitions not read to their end yet.
type txnScan struct {
	ends  map[partitionKey]int64
	left  int
	state map[partitionKey]map[int64]*txnState
	done  map[partitionKey]bool
}

// record takes one record of the log, a control record (a marker, which closes its producer's
// transaction) or a transactional one (which opens it).
func (t *txnScan) record(r *kgo.Record) {
	k := partitionKey{r.Topic, r.Partition}
	if t.state[k] == nil {
		t.state[k] = map[int64]*txnState{}
	}
	s := t.state[k][r.ProducerID]
	if s == nil {
		s = &txnState{}
		t.state[k][r.ProducerID] = s
	}
	switch {
	case r.Attrs.IsControl():
		s.open = false
	case r.Attrs.IsTransactional():
		s.open, s.epoch = true, r.ProducerEpoch
	}
	if !t.done[k] && r.Offset+1 >= t.ends[k] {
		t.done[k] = true
		t.left--
	}
}

// open answers the transactions left open at the end of the log.
func (t *txnScan) open() []danglingTxn {
	var out []danglingTxn
	for k, producers := range t.state {
		for pid, s := range producers {
			if s.open {
				out = append(out, danglingTxn{topic: k.topic, partition: k.partition, producer: pid, epoch: s.epoch})
			}
		}
	}
	return out
}

// takeCleanMark reports whether the last broker on dir closed cleanly, and removes the mark: a
// broker that now crashes must not be taken for one that closed.
func takeCleanMark(dir string) (bool, error) {
	err := os.Remove(filepath.Join(dir, cleanMark))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("kafkabroker: data dir: %w", err)
	}
}

// hasLog reports whether dir holds a saved broker state.
func hasLog(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "meta.json"))
	return err == nil
}

// closeDangling runs abortDangling after a start that followed a crash, and logs what it did.
func closeDangling(c *kfake.Cluster, addrs []string, cl *kgo.Client, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), danglingTimeout)
	defer cancel()
	start := time.Now()
	n, err := abortDangling(ctx, c, addrs, cl)
	if err != nil {
		return fmt.Errorf("kafkabroker: the last broker on this data dir did not close; closing the transactions it left open: %w", err)
	}
	logger.Warn("the last broker on this data dir did not close: its log was read and the transactions it left open were aborted",
		"component", "kafkabroker", "aborted", n, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// danglingTimeout bounds the read of the whole log after a crash.
const danglingTimeout = 5 * time.Minute
