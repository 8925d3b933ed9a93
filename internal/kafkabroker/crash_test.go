package kafkabroker_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/imledger/imledger/internal/kafkabroker"
	"github.com/imledger/imledger/internal/testenv"
)

// children are the child sides of the tests that kill a broker (see killAfterAck): the child
// named by KAFKABROKER_CHILD runs a broker on the data dir KAFKABROKER_CHILD_DIR, prints a line
// starting "acked" once what it did is acknowledged, and waits to be killed.
var children = map[string]func(dir string) error{"crash": crashChild, "txn": txnChild}

func init() {
	child := children[os.Getenv("KAFKABROKER_CHILD")]
	if child == nil {
		return
	}
	if err := child(os.Getenv("KAFKABROKER_CHILD_DIR")); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	select {}
}

// killAfterAck runs the child named child on a new data dir, kills it (SIGKILL) once it reports,
// and returns the data dir and the rest of its "acked" line.
func killAfterAck(t *testing.T, child string) (dir, acked string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "kafka")
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "KAFKABROKER_CHILD="+child, "KAFKABROKER_CHILD_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "acked") {
		_ = cmd.Process.Kill()
		t.Fatalf("child %s: %q, %v", child, line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	return dir, strings.TrimSpace(strings.TrimPrefix(line, "acked"))
}

// newTopic creates topic with partitions partitions.
func newTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	return nil
}

// crashChild produces records and commits an offset, then reports the cluster id.
func crashChild(dir string) error {
	b, err := kafkabroker.Start(kafkabroker.Config{Addr: "127.0.0.1:0", DataDir: dir, Partitions: 2}, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Offset commits by topic name, not id: Kafka 3.x versions.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.DefaultProduceTopic("im.crash"),
		kgo.MaxVersions(kversion.V3_5_0()))
	if err != nil {
		return err
	}
	if err := newTopic(ctx, cl, "im.crash", 2); err != nil {
		return err
	}
	for i := range 50 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte{byte(i)}, Value: []byte("v")}).FirstErr(); err != nil {
			return err
		}
	}
	if err := testenv.CommitOffset(ctx, cl, "g", "im.crash", 0, 7); err != nil {
		return err
	}
	id, err := clusterIDOf(ctx, cl)
	if err != nil {
		return err
	}
	fmt.Println("acked", id)
	return nil
}

func clusterIDOf(ctx context.Context, cl *kgo.Client) (string, error) {
	m, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return "", err
	}
	if m.ClusterID == nil {
		return "", fmt.Errorf("no cluster id in metadata")
	}
	return *m.ClusterID, nil
}

// A broker with a data dir that is killed (SIGKILL, no Close) keeps every record and offset
// commit it acknowledged, and its cluster id: produces reach the file before the ack.
func TestDataDirSurvivesKill(t *testing.T) {
	t.Parallel()
	dir, id := killAfterAck(t, "crash")

	b, err := kafkabroker.Start(kafkabroker.Config{Addr: "127.0.0.1:0", DataDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumeTopics("im.crash"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MaxVersions(kversion.V3_5_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got, err := clusterIDOf(ctx, cl); err != nil || got != id {
		t.Fatalf("cluster id after the kill = %q, %v; want %q", got, err, id)
	}
	got := 0
	for got < 50 && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		pcancel()
		got += fs.NumRecords()
	}
	if got != 50 {
		t.Fatalf("read %d records after the kill, want the 50 acknowledged", got)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = "g"
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = "im.crash", []int32{0}
	fetch.Topics = append(fetch.Topics, ft)
	offs, err := fetch.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(offs.Topics) != 1 || len(offs.Topics[0].Partitions) != 1 || offs.Topics[0].Partitions[0].Offset != 7 {
		t.Fatalf("committed offset after the kill = %+v, want 7", offs.Topics)
	}
}

func TestClusterIDIsNewPerLogAndDataDirIsExclusive(t *testing.T) {
	t.Parallel()
	ids := map[string]bool{}
	for range 2 {
		b, err := kafkabroker.Start(kafkabroker.Config{Addr: "127.0.0.1:0"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[idOf(t, b)] = true
		b.Close()
	}
	if len(ids) != 2 {
		t.Fatalf("two in-memory brokers had the same cluster id: %v", ids)
	}
	dir := filepath.Join(t.TempDir(), "kafka")
	cfg := kafkabroker.Config{Addr: "127.0.0.1:0", DataDir: dir}
	b, err := kafkabroker.Start(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := idOf(t, b)
	if b2, err := kafkabroker.Start(cfg, nil); err == nil {
		b2.Close()
		t.Fatal("a second broker started on a data dir in use")
	}
	b.Close()
	b, err = kafkabroker.Start(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if again := idOf(t, b); again != first {
		t.Fatalf("cluster id after a restart on the same data dir = %q, want %q", again, first)
	}
}

func idOf(t *testing.T, b *kafkabroker.Broker) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	id, err := clusterIDOf(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestDefaultDataDirIsPerNode(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/var/lib/x")
	if got := kafkabroker.DefaultDataDir("n1"); got != "/var/lib/x/imledger/kafka/n1" {
		t.Fatalf("DefaultDataDir = %q", got)
	}
}
