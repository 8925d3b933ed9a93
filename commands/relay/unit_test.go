package relay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/kafka"
)

func TestIsTraceparent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want bool
	}{
		{validTraceparent, true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		{"", false},
		{"4bf92f3577b34da6a3ce929d0e0e4736", false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false}, // upper case
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false}, // invalid version
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false}, // zero trace id
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false}, // zero parent id
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", false},
		{"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", false},
	}
	for _, tt := range tests {
		if got := relay.IsTraceparent(tt.in); got != tt.want {
			t.Errorf("IsTraceparent(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestKeyUsesConversation(t *testing.T) {
	t.Parallel()
	acme := domain.MustTenantID("acme")
	tests := []struct{ stream, want string }{
		{"grp7", "acme:grp7"},
		{"grp7/m/12", "acme:grp7"},
		{"p2p1_2/read/1", "acme:p2p1_2"},
		{"user/42", "acme:user"},
	}
	for _, tt := range tests {
		if got := relay.Key(domain.Envelope{TenantID: acme, StreamID: tt.stream}); got != tt.want {
			t.Errorf("Key(stream %q) = %q, want %q", tt.stream, got, tt.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     relay.Config
		wantErr string
	}{
		{"zero value", relay.Config{}, ""},
		{"negative batch", relay.Config{BatchSize: -1}, "batch size"},
		{"poll inverted", relay.Config{MinPoll: time.Second, MaxPoll: time.Millisecond}, "poll"},
		{"retry inverted", relay.Config{RetryMin: time.Second, RetryMax: time.Millisecond}, "retry"},
		{"negative lock retry", relay.Config{LockRetry: -time.Second}, "LockRetry"},
		{"bad kafka", relay.Config{Kafka: kafka.Config{Brokers: []string{"b:1"}, TopicPrefix: "a b"}}, "topic prefix"},
		{"kafka without brokers", relay.Config{Kafka: kafka.Config{TopicPrefix: "x."}}, ""},
		{"client detection not below server detection", relay.Config{LockCheck: 5 * time.Second, LockTimeout: 5 * time.Second}, "shorter than the server"},
		{"keepalive below a second", relay.Config{KeepaliveIdle: time.Millisecond}, "KeepaliveIdle"},
		{"negative gap deadline", relay.Config{GapDeadline: -time.Second}, "GapDeadline"},
		{"short transaction timeout", relay.Config{TransactionTimeout: time.Millisecond}, "transaction timeout"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: Validate() = %v, want error containing %q", tt.name, err, tt.wantErr)
		}
	}
	if relay.DefaultLockID("a") == relay.DefaultLockID("b") {
		t.Error("DefaultLockID must be stable and differ between names")
	}
}

func TestNewChecksDependenciesAndMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, false)
	k := e.kcfg
	if _, err := relay.New(nil, e.pool, relay.Config{Kafka: k}, testLogger(), nil); err == nil {
		t.Error("New accepted a nil store")
	}
	if _, err := relay.New(e.store, e.pool, relay.Config{BatchSize: -1, Kafka: k}, testLogger(), nil); err == nil {
		t.Error("New accepted an invalid config")
	}
	if _, err := relay.New(e.store, e.pool, relay.Config{}, testLogger(), nil); err == nil {
		t.Error("New accepted a config without Kafka brokers")
	}
	reg := prometheus.NewRegistry()
	if _, err := relay.New(e.store, e.pool, relay.Config{Name: "a", Kafka: k}, testLogger(), reg); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.New(e.store, e.pool, relay.Config{Name: "b", Kafka: k}, testLogger(), reg); err != nil {
		t.Errorf("relays of different names cannot share a registry: %v", err)
	}
	if _, err := relay.New(e.store, e.pool, relay.Config{Name: "a", Kafka: k}, testLogger(), reg); err == nil {
		t.Error("a second relay of the same name registered its metrics again without error")
	}
}

// TestEveryEventCategoryHasATopic guards the category → topic table of internal/kafka, which
// cannot import domain and so names the categories by value: a category domain registers
// without a topic there would leave its events unpublishable.
func TestEveryEventCategoryHasATopic(t *testing.T) {
	t.Parallel()
	cfg := kafka.Config{TopicPrefix: "p."}
	for _, info := range domain.EventTypes() {
		if _, ok := cfg.CategoryTopic(string(info.Category)); !ok {
			t.Errorf("event type %s: category %q has no topic", info.Type, info.Category)
		}
	}
	for _, cat := range []domain.Category{domain.CategoryGroupMessage, domain.CategoryDirectMessage,
		domain.CategoryBusiness, domain.CategorySession, domain.CategoryAudit, domain.CategoryConfig} {
		if _, ok := cfg.CategoryTopic(string(cat)); !ok {
			t.Errorf("category %q has no topic", cat)
		}
	}
}
