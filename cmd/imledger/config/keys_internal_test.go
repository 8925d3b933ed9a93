package config

import (
	"log/slog"
	"testing"
	"time"
)

func TestSnake(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"BatchSize": "batch_size", "URL": "url", "HTTPAddr": "http_addr", "MaxConns": "max_conns",
		"PollInterval": "poll_interval", "TopicPrefix": "topic_prefix", "ID": "id", "V2Name": "v2_name",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// componentConfig has the shape of a component package's Config: no koanf tags, a logger and a
// callback that are not configuration.
type componentConfig struct {
	BatchSize    int
	PollInterval time.Duration
	Topics       []string
	Logger       *slog.Logger
	OnError      func(error)
	Named        string `koanf:"renamed"`
	Hidden       string `koanf:"-"`
	unexported   int
}

func TestFlattenComponentConfig(t *testing.T) {
	t.Parallel()
	got := flatten(struct {
		Relay componentConfig `koanf:"relay"`
	}{Relay: componentConfig{BatchSize: 5, unexported: 1}})
	want := []string{"relay.batch_size", "relay.poll_interval", "relay.topics", "relay.renamed"}
	if len(got) != len(want) {
		t.Fatalf("got keys %v, want %v", got, want)
	}
	for _, k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("missing key %s in %v", k, got)
		}
	}
	if got["relay.batch_size"] != 5 {
		t.Errorf("value not carried: %v", got["relay.batch_size"])
	}
	if !matchName("batch_size", "BatchSize") || matchName("batch_size", "Batch") {
		t.Error("matchName")
	}
}
