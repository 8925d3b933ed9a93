package kafkabroker_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/internal/kafkabroker"
)

const txnTopic = "im.txn"

// txnChild commits one transaction and leaves a second one open with its records acknowledged
// (the child side of TestTransactionOpenAtAKillIsAborted).
func txnChild(dir string) error {
	b, err := kafkabroker.Start(kafkabroker.Config{Addr: "127.0.0.1:0", DataDir: dir}, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		return err
	}
	if err := newTopic(ctx, admin, txnTopic, 1); err != nil {
		return err
	}
	cl, err := txnClient(b.Addrs())
	if err != nil {
		return err
	}
	if err := produceTxn(ctx, cl, kgo.TryCommit, "a1", "a2"); err != nil {
		return err
	}
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, record("b1"), record("b2")).FirstErr(); err != nil {
		return err
	}
	fmt.Println("acked")
	return nil
}

func txnClient(addrs []string) (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(txnTopic), kgo.TransactionalID("relay"))
}

func record(v string) *kgo.Record { return &kgo.Record{Value: []byte(v)} }

func produceTxn(ctx context.Context, cl *kgo.Client, end kgo.TransactionEndTry, values ...string) error {
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = record(v)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return err
	}
	return cl.EndTransaction(ctx, end)
}

// A broker killed while a transaction was open comes back with that transaction aborted by a
// marker, so the transactions its producer commits after the restart are visible to
// read_committed consumers (without the marker they skip them all), and the open one is not.
func TestTransactionOpenAtAKillIsAborted(t *testing.T) {
	t.Parallel()
	dir, _ := killAfterAck(t, "txn")

	b, err := kafkabroker.Start(kafkabroker.Config{Addr: "127.0.0.1:0", DataDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cl, err := txnClient(b.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	if err := produceTxn(ctx, cl, kgo.TryCommit, "c1", "c2"); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if got := readCommitted(ctx, t, b.Addrs(), 4); !slices.Equal(got, []string{"a1", "a2", "c1", "c2"}) {
		t.Fatalf("read_committed after the restart: %v, want [a1 a2 c1 c2]", got)
	}

	// A clean close leaves nothing open and needs no repair; the records stay as they are.
	b.Close()
	b, err = kafkabroker.Start(kafkabroker.Config{Addr: "127.0.0.1:0", DataDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := readCommitted(ctx, t, b.Addrs(), 4); !slices.Equal(got, []string{"a1", "a2", "c1", "c2"}) {
		t.Fatalf("read_committed after a clean restart: %v", got)
	}
}

// readCommitted reads txnTopic with isolation level read_committed until want records came or
// nothing more arrives for two seconds.
func readCommitted(ctx context.Context, t *testing.T, addrs []string, want int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(txnTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	for len(got) < want && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if pctx.Err() != nil && fs.NumRecords() == 0 {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}
