package projections

import (
	"testing"
	"time"

	tkafka "github.com/imledger/imledger/internal/kafka"
)

// TestQuietTopicsLongPoll: a projector of the message topics batches its fetches (min bytes,
// max wait), while one of the business, session or audit topics long-polls: its fetch is
// answered at the first record and held for kafka.fetch_idle_wait when none comes, so an idle
// node does not wake it every fetch_max_wait.
func TestQuietTopicsLongPoll(t *testing.T) {
	t.Parallel()
	cfg := Config{Kafka: tkafka.Config{Brokers: []string{"127.0.0.1:9"}, FetchIdleWait: 1500 * time.Millisecond},
		FetchMinBytes: 4096, FetchMaxWait: 70 * time.Millisecond}
	p := &Projector{cfg: cfg}
	for _, c := range []struct {
		topics  []string
		min     int32
		maxWait time.Duration
	}{
		{[]string{tkafka.TopicGroupMessagePersist, tkafka.TopicMessagePersist}, 4096, 70 * time.Millisecond},
		{[]string{tkafka.TopicMessagePersist, tkafka.TopicAuditEvent}, 4096, 70 * time.Millisecond},
		{[]string{tkafka.TopicBusinessEvent}, 1, 1500 * time.Millisecond},
		{[]string{tkafka.TopicSessionEvent}, 1, 1500 * time.Millisecond},
		{[]string{tkafka.TopicAuditEvent}, 1, 1500 * time.Millisecond},
	} {
		sc, err := p.saramaConfig(c.topics)
		if err != nil {
			t.Fatal(err)
		}
		if sc.Consumer.Fetch.Min != c.min || sc.Consumer.MaxWaitTime != c.maxWait {
			t.Errorf("%v: fetch min %d, max wait %s; want %d, %s", c.topics, sc.Consumer.Fetch.Min,
				sc.Consumer.MaxWaitTime, c.min, c.maxWait)
		}
	}
}
