package configwatch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/kafka/configwatch"
)

type reloads struct {
	mu  sync.Mutex
	got []string
}

func (r *reloads) Reload(_ context.Context, t domain.TenantID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, t.String())
	return nil
}

func (r *reloads) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// TestWatcherReloadsTenantsOfConfigEvents: records published after Start are seen on every
// partition; only config events make a tenant reload.
func TestWatcherReloadsTenantsOfConfigEvents(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	cfg := tkafka.Config{Brokers: testenv.Kafka(t), Partitions: 3}
	if err := tkafka.EnsureTopics(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	r := &reloads{}
	w, err := configwatch.New(cfg, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = w.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()

	p, err := tkafka.NewSyncProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	topic := cfg.Topic(tkafka.TopicConfigEvent)
	for _, rec := range []struct{ key, value string }{
		{"acme:tenant", `{"tenant_id":"acme","event_type":"tenant.config_set.v1"}`},
		{"globex:tenant", `{"tenant_id":"globex","event_type":"tenant.suspended.v1"}`},
		{"acme:grp1", `{"tenant_id":"acme","event_type":"message.group.sent.v1"}`},
		{"x", `not json`},
	} {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(rec.key),
			Value: sarama.StringEncoder(rec.value)}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(r.snapshot()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	got := r.snapshot()
	if len(got) != 2 || !(got[0] == "acme" || got[1] == "acme") || !(got[0] == "globex" || got[1] == "globex") {
		t.Fatalf("reloaded %v, want acme and globex once each", got)
	}
}
