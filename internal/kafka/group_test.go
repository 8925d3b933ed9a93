package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
)

var (
	errSetup = errors.New("setup refused on purpose")
	errClaim = errors.New("claim failed on purpose")
)

// flakyHandler refuses its first session in Setup and fails its first claim that gets a record,
// without marking it; afterwards it sends every record's value on got and then marks it.
type flakyHandler struct {
	got chan string

	mu        sync.Mutex
	setups    int
	claimDone bool
}

func (h *flakyHandler) Setup(sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.setups++
	if h.setups == 1 {
		return errSetup
	}
	return nil
}

func (h *flakyHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *flakyHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		fail := !h.claimDone
		h.claimDone = true
		h.mu.Unlock()
		if fail {
			return errClaim
		}
		select {
		case h.got <- string(m.Value):
		case <-sess.Context().Done():
			return nil // unmarked: the next session reads it again
		}
		sess.MarkMessage(m, "")
	}
	return nil
}

// reports collects what RunGroup reported.
type reports struct {
	mu   sync.Mutex
	errs []error
}

func (r *reports) report(_ context.Context, msg string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Errorf("%s: %w", msg, err))
}

func (r *reports) has(target error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, err := range r.errs {
		if errors.Is(err, target) || strings.Contains(err.Error(), target.Error()) {
			return true
		}
	}
	return false
}

// groupEnv is a topic of the embedded broker holding n records, and the configuration to reach it.
func groupEnv(t *testing.T, n int) (kafka.Config, string) {
	t.Helper()
	cfg := kafka.Config{Brokers: testenv.Kafka(t), TopicPrefix: testenv.UniqueName("g") + ".", Partitions: 2}
	topic := cfg.Topic(kafka.TopicFileSecurity)
	if err := kafka.EnsureTopic(t.Context(), cfg, topic); err != nil {
		t.Fatal(err)
	}
	prod, err := kafka.NewSyncProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprint(i)), Value: sarama.StringEncoder(fmt.Sprint(i))}
	}
	if err := prod.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
	return cfg, topic
}

// runGroup starts RunGroup in a goroutine and returns the channel of its result.
func runGroup(ctx context.Context, g sarama.ConsumerGroup, topic string, h sarama.ConsumerGroupHandler, r *reports) <-chan error {
	done := make(chan error, 1)
	go func() { done <- kafka.RunGroup(ctx, g, []string{topic}, h, r.report) }()
	return done
}

func waitRun(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("RunGroup did not return")
		return nil
	}
}

// RunGroup must read every record (from the oldest, as NewConsumerGroup sets), join again after
// a session whose Setup failed and after one whose claim failed, report both failures, and return
// nil with the group closed once its context ends.
func TestRunGroupRejoinsAfterFailedSessionsAndStopsWithContext(t *testing.T) {
	t.Parallel()
	const n = 20
	cfg, topic := groupEnv(t, n)
	g, err := kafka.NewConsumerGroup(cfg, testenv.UniqueName("run"), true)
	if err != nil {
		t.Fatal(err)
	}
	h := &flakyHandler{got: make(chan string)}
	var r reports
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := runGroup(ctx, g, topic, h, &r)

	seen := map[string]bool{}
	deadline := time.After(60 * time.Second)
	for len(seen) < n {
		select {
		case v := <-h.got:
			seen[v] = true
		case err := <-done:
			t.Fatalf("RunGroup returned %v after %d of %d records", err, len(seen), n)
		case <-deadline:
			t.Fatalf("read %d of %d records", len(seen), n)
		}
	}
	cancel()
	if err := waitRun(t, done); err != nil {
		t.Fatalf("RunGroup after its context ended: %v, want nil", err)
	}
	h.mu.Lock()
	setups := h.setups
	h.mu.Unlock()
	if setups < 3 { // refused, the failed claim's, and the one after it
		t.Errorf("%d sessions set up, want at least 3", setups)
	}
	for _, want := range []error{errSetup, errClaim} {
		if !r.has(want) {
			t.Errorf("%q was not reported; reports: %v", want, r.errs)
		}
	}
	if err := g.Consume(t.Context(), []string{topic}, h); !errors.Is(err, sarama.ErrClosedConsumerGroup) {
		t.Errorf("Consume after RunGroup returned: %v, want the group closed", err)
	}
}

// readyHandler tells when its first session is set up and marks what it reads.
type readyHandler struct {
	ready chan struct{}
	once  sync.Once
}

func (h *readyHandler) Setup(sarama.ConsumerGroupSession) error {
	h.once.Do(func() { close(h.ready) })
	return nil
}

func (h *readyHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *readyHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		sess.MarkMessage(m, "")
	}
	return nil
}

// A group closed elsewhere while the context lasts must end RunGroup with
// sarama.ErrClosedConsumerGroup, not with nil and not by joining again forever; without
// Return.Errors, draining the group's errors must not hold it up.
func TestRunGroupReturnsWhenClosedElsewhere(t *testing.T) {
	t.Parallel()
	cfg, topic := groupEnv(t, 3)
	g, err := kafka.NewConsumerGroup(cfg, testenv.UniqueName("closed"), false)
	if err != nil {
		t.Fatal(err)
	}
	h := &readyHandler{ready: make(chan struct{})}
	var r reports
	done := runGroup(t.Context(), g, topic, h, &r)
	select {
	case <-h.ready:
	case err := <-done:
		t.Fatalf("RunGroup returned %v before its first session", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no session was set up")
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := waitRun(t, done); !errors.Is(err, sarama.ErrClosedConsumerGroup) {
		t.Fatalf("RunGroup after the group was closed elsewhere: %v, want sarama.ErrClosedConsumerGroup", err)
	}
	if t.Context().Err() != nil {
		t.Fatal("the test's context ended: RunGroup may have returned for that")
	}
}
