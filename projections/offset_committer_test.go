package projections_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/projections"
)

// rawUnmarshaler makes a watermill message of any record.
type rawUnmarshaler struct{}

func (rawUnmarshaler) Unmarshal(r *sarama.ConsumerMessage) (*message.Message, error) {
	return message.NewMessage(fmt.Sprintf("%d-%d", r.Partition, r.Offset), r.Value), nil
}

// committedNext returns the offset the group resumes partition 0 of topic from (-1: none).
func committedNext(t *testing.T, admin sarama.ClusterAdmin, group, topic string) int64 {
	t.Helper()
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0}})
	if err != nil {
		t.Fatal(err)
	}
	if b := resp.GetBlock(topic, 0); b != nil {
		return b.Offset
	}
	return -1
}

// TestAckedOffsetsAreCommittedWhileTheNextFetchWaits: a quiet topic's subscriber long-polls
// (its fetch is held until a record comes or MaxWaitTime passes). Once a burst is applied, its
// offsets reach Kafka within a fraction of a second, not when the next fetch, waiting for
// records that do not come, returns; and the subscriber without its own commits shows what it
// replaces: nothing committed until that fetch returns.
func TestAckedOffsetsAreCommittedWhileTheNextFetchWaits(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t, kfake.SeedTopics(1, "quiet-early", "quiet-auto"))
	conf := sarama.NewConfig()
	conf.Version = sarama.V3_6_0_0
	conf.Consumer.Offsets.Initial = sarama.OffsetOldest
	conf.Consumer.Fetch.Min = 1
	conf.Consumer.MaxWaitTime = 4 * time.Second // a long poll, as kafka.fetch_idle_wait
	conf.Net.ReadTimeout = 30 * time.Second
	conf.Producer.Return.Successes = true
	producer, err := sarama.NewSyncProducer(brokers, conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = producer.Close() })
	admin, err := sarama.NewClusterAdmin(brokers, conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })

	for _, c := range []struct {
		group, topic string
		delay        time.Duration
		early        bool // the offsets of a burst are committed within a second
	}{{"with-early-commits", "quiet-early", 0, true}, {"auto-commit-only", "quiet-auto", -1, false}} {
		t.Run(c.group, func(t *testing.T) {
			t.Parallel()
			sub, err := projections.NewPipelinedSubscriber(projections.PipelinedSubscriberConfig{Brokers: brokers,
				ConsumerGroup: c.group, Sarama: conf, Unmarshaler: rawUnmarshaler{}, CommitDelay: c.delay}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(testenv.Context(t))
			msgs, err := sub.Subscribe(ctx, c.topic)
			if err != nil {
				t.Fatal(err)
			}
			// One record to join the group and settle into the long poll, then a burst of five.
			next := func(n int) {
				for range n {
					if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: c.topic, Value: sarama.StringEncoder("x")}); err != nil {
						t.Fatal(err)
					}
				}
				for range n {
					select {
					case m := <-msgs:
						m.Ack()
					case <-time.After(20 * time.Second):
						t.Fatalf("%s: a record did not arrive", c.group)
					}
				}
			}
			next(1)
			time.Sleep(1500 * time.Millisecond) // past the first auto-commit; the member now waits in a fetch
			next(5)
			applied := time.Now()
			for committedNext(t, admin, c.group, c.topic) < 6 && time.Since(applied) < time.Second {
				time.Sleep(20 * time.Millisecond)
			}
			got := committedNext(t, admin, c.group, c.topic)
			if early := got >= 6; early != c.early {
				t.Errorf("%s: a second after the burst was acked the group resumes from %d (early commits %v, want %v)",
					c.group, got, early, c.early)
			}
			cancel()
			_ = sub.Close()
		})
	}
}
