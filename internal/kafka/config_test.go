package kafka_test

import (
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/internal/kafka"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     kafka.Config
		wantErr string // substring; "" means valid
	}{
		{"defaults", kafka.Config{Brokers: []string{"127.0.0.1:9092"}}, ""},
		{"no brokers", kafka.Config{}, "brokers"},
		{"empty broker", kafka.Config{Brokers: []string{" "}}, "empty address"},
		{"bad prefix", kafka.Config{Brokers: []string{"b:1"}, TopicPrefix: "a/b"}, "topic prefix"},
		{"good prefix", kafka.Config{Brokers: []string{"b:1"}, TopicPrefix: "stage-1_x."}, ""},
		{"negative partitions", kafka.Config{Brokers: []string{"b:1"}, Partitions: -1}, "partitions"},
		{"negative replication", kafka.Config{Brokers: []string{"b:1"}, ReplicationFactor: -1}, "replication"},
		{"bad version", kafka.Config{Brokers: []string{"b:1"}, Version: "x"}, "version"},
		{"old version", kafka.Config{Brokers: []string{"b:1"}, Version: "0.10.2.0"}, "0.11.0"},
		{"bad compression", kafka.Config{Brokers: []string{"b:1"}, Compression: "brotli"}, "compression"},
		{"lz4", kafka.Config{Brokers: []string{"b:1"}, Compression: "lz4"}, ""},
		{"huge message", kafka.Config{Brokers: []string{"b:1"}, MaxMessageBytes: 1 << 30}, "max message bytes"},
		{"negative flush", kafka.Config{Brokers: []string{"b:1"}, FlushMessages: -1}, "flush"},
		{"fetch idle wait past the read timeout", kafka.Config{Brokers: []string{"b:1"}, FetchIdleWait: time.Minute}, "fetch idle wait"},
		{"negative fetch idle wait", kafka.Config{Brokers: []string{"b:1"}, FetchIdleWait: -time.Second}, "fetch idle wait"},
		{"short dial timeout, default fetch idle wait", kafka.Config{Brokers: []string{"b:1"}, DialTimeout: 300 * time.Millisecond}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestValidateJoinsAllErrors(t *testing.T) {
	t.Parallel()
	err := kafka.Config{Partitions: -2, Compression: "nope"}.Validate()
	for _, want := range []string{"brokers", "partitions", "compression"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
}

func TestTopicsCarryPrefix(t *testing.T) {
	t.Parallel()
	cfg := kafka.Config{TopicPrefix: "dev."}
	topics := cfg.Topics()
	if len(topics) != 12 { // with im.file.security
		t.Fatalf("Topics() has %d names, want 12: %v", len(topics), topics)
	}
	seen := map[string]bool{}
	for _, n := range topics {
		if !strings.HasPrefix(n, "dev.im.") {
			t.Errorf("topic %q lacks the prefix", n)
		}
		if seen[n] {
			t.Errorf("topic %q listed twice", n)
		}
		seen[n] = true
	}
	if got := cfg.Topic(kafka.TopicDeadLetter); got != "dev.im.dead.letter" {
		t.Errorf("Topic(dead letter) = %q", got)
	}
}

func TestCategoryTopic(t *testing.T) {
	t.Parallel()
	cfg := kafka.Config{TopicPrefix: "p."}
	tests := []struct {
		cat  string
		want string
		ok   bool
	}{
		{"group_message", "p.im.group.message.persist", true},
		{"direct_message", "p.im.message.persist", true},
		{"business", "p.im.business.event", true},
		{"session", "p.im.session.event", true},
		{"audit", "p.im.audit.event", true},
		{"config", "p.im.config.event", true},
		{"nonsense", "", false},
	}
	for _, tt := range tests {
		got, ok := cfg.CategoryTopic(tt.cat)
		if got != tt.want || ok != tt.ok {
			t.Errorf("CategoryTopic(%q) = %q, %v; want %q, %v", tt.cat, got, ok, tt.want, tt.ok)
		}
	}
}

func TestProducerConfigIsSafe(t *testing.T) {
	t.Parallel()
	sc, err := kafka.NewProducerConfig(kafka.Config{Brokers: []string{"b:1"}, Compression: "lz4", ClientID: "relay-x"})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Producer.RequiredAcks != sarama.WaitForAll {
		t.Errorf("RequiredAcks = %v, want WaitForAll", sc.Producer.RequiredAcks)
	}
	if !sc.Producer.Idempotent || sc.Net.MaxOpenRequests != 1 {
		t.Errorf("Idempotent = %v, MaxOpenRequests = %d; want true, 1", sc.Producer.Idempotent, sc.Net.MaxOpenRequests)
	}
	if !sc.Producer.Return.Successes || !sc.Producer.Return.Errors {
		t.Error("SyncProducer needs Return.Successes and Return.Errors")
	}
	if sc.Producer.Compression != sarama.CompressionLZ4 || sc.ClientID != "relay-x" {
		t.Errorf("compression %v, client id %q", sc.Producer.Compression, sc.ClientID)
	}
	if _, err := kafka.NewProducerConfig(kafka.Config{}); err == nil {
		t.Error("NewProducerConfig accepted a config without brokers")
	}
}
