package kafkabroker_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/imledger/imledger/internal/kafkabroker"
)

const txnTopic = "im.txn"

// The child side of TestTransactionOpenAtAKillIsAborted: commit one transaction, leave a second
// one open with its records acknowledged, report it, and wait to be killed.
func init() {
	dir := os.Getenv("KAFKABROKER_TXN_CHILD_DIR")
	if dir == "" {
		return
	}
	if err := txnChild(dir); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	select {}
}

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
	create := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = txnTopic, 1, 1
	create.Topics = append(create.Topics, rt)
	if resp, err := create.RequestWith(ctx, admin); err != nil || resp.Topics[0].ErrorCode != 0 {
		return fmt.Errorf("create topic: %v %+v", err, resp)
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
	dir := filepath.Join(t.TempDir(), "kafka")
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "KAFKABROKER_TXN_CHILD_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "acked\n" {
		_ = cmd.Process.Kill()
		t.Fatalf("child: %q, %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

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
