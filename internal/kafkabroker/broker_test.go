package kafkabroker_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/internal/kafkabroker"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     kafkabroker.Config
		wantErr string
	}{
		{"defaults", kafkabroker.Config{}, ""},
		{"random port", kafkabroker.Config{Addr: "127.0.0.1:0"}, ""},
		{"no port", kafkabroker.Config{Addr: "127.0.0.1"}, "addr"},
		{"unspecified host", kafkabroker.Config{Addr: "0.0.0.0:9092"}, "dialable"},
		{"empty host", kafkabroker.Config{Addr: ":9092"}, "dialable"},
		{"bad port", kafkabroker.Config{Addr: "localhost:x"}, "bad port"},
		{"negative partitions", kafkabroker.Config{Partitions: -1}, "partitions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func produceAndCount(t *testing.T, addrs []string, topic string, produce int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range produce {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte{byte(i)}, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	// Read until the high watermark is reached: a short poll after the last record.
	got := 0
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		pcancel()
		n := fs.NumRecords()
		got += n
		if n == 0 {
			return got
		}
	}
}

func TestStartOnRandomPortServesKafka(t *testing.T) {
	t.Parallel()
	b, err := kafkabroker.Start(kafkabroker.Config{Addr: "127.0.0.1:0", AutoCreateTopics: true, Partitions: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addrs := b.Addrs()
	if len(addrs) != 1 || strings.HasSuffix(addrs[0], ":0") {
		t.Fatalf("Addrs() = %v, want one address with a real port", addrs)
	}
	if got := produceAndCount(t, addrs, "im.test", 5); got != 5 {
		t.Fatalf("read back %d records, want 5", got)
	}
	b.Close()
	b.Close() // a second Close is a no-op
	if c, err := net.DialTimeout("tcp", addrs[0], time.Second); err == nil {
		c.Close()
		t.Fatal("broker still accepts connections after Close")
	}
}

func TestStartFailsWhenAddressIsTaken(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if b, err := kafkabroker.Start(kafkabroker.Config{Addr: ln.Addr().String()}, nil); err == nil {
		b.Close()
		t.Fatal("Start succeeded on an address in use")
	}
}

func TestDataDirSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "kafka")
	cfg := kafkabroker.Config{Addr: "127.0.0.1:0", DataDir: dir, AutoCreateTopics: true}
	b, err := kafkabroker.Start(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := produceAndCount(t, b.Addrs(), "im.keep", 4); got != 4 {
		t.Fatalf("read back %d records, want 4", got)
	}
	b.Close()

	b, err = kafkabroker.Start(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := produceAndCount(t, b.Addrs(), "im.keep", 1); got != 5 {
		t.Fatalf("after restart read back %d records, want the 4 kept plus 1 new", got)
	}
}
