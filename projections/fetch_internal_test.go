package projections

import (
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	tkafka "github.com/imledger/imledger/internal/kafka"
)

// TestProjectorsLongPoll: every projector's fetch is answered at the first record and held for
// kafka.fetch_idle_wait when none comes, so an idle node polls seldom; a projector of the message
// topics also spaces its fetches by fetch_linger, with a linger of its own.
func TestProjectorsLongPoll(t *testing.T) {
	t.Parallel()
	cfg := Config{Kafka: tkafka.Config{Brokers: []string{"127.0.0.1:9"}, FetchIdleWait: 1500 * time.Millisecond},
		FetchLinger: 70 * time.Millisecond}
	p := &Projector{cfg: cfg}
	var lingers []*fetchLinger
	for _, c := range []struct {
		topics []string
		linger bool
	}{
		{[]string{tkafka.TopicGroupMessagePersist, tkafka.TopicMessagePersist}, true},
		{[]string{tkafka.TopicMessagePersist, tkafka.TopicAuditEvent}, true},
		{[]string{tkafka.TopicBusinessEvent}, false},
		{[]string{tkafka.TopicSessionEvent}, false},
		{[]string{tkafka.TopicAuditEvent}, false},
	} {
		sc, err := p.saramaConfig(c.topics)
		if err != nil {
			t.Fatal(err)
		}
		if sc.Consumer.Fetch.Min != 1 || sc.Consumer.MaxWaitTime != 1500*time.Millisecond {
			t.Errorf("%v: fetch min %d, max wait %s; want 1, 1.5s", c.topics, sc.Consumer.Fetch.Min, sc.Consumer.MaxWaitTime)
		}
		var got *fetchLinger
		for _, i := range sc.Consumer.Interceptors {
			if l, ok := i.(*fetchLinger); ok {
				got = l
			}
		}
		switch {
		case c.linger && (got == nil || got.hold != 70*time.Millisecond || got.gap != answerGap):
			t.Errorf("%v: fetch linger %+v, want one holding 70ms", c.topics, got)
		case !c.linger && got != nil:
			t.Errorf("%v: a fetch linger on a quiet topic's projector", c.topics)
		case got != nil:
			lingers = append(lingers, got)
		}
	}
	if len(lingers) == 2 && lingers[0] == lingers[1] {
		t.Error("two consumer groups share one fetch linger")
	}
}

// TestFetchLingerHoldsAnAnswerOnce: the first record of an answer is held for the linger; the
// records of other partitions handed on during the hold go with it, at the hold's end, and the
// rest of the held partition's answer passes after it; the first record of the next answer is
// held again.
func TestFetchLingerHoldsAnAnswerOnce(t *testing.T) {
	t.Parallel()
	// A gap wider than answerGap: a goroutine of a loaded test machine may wait that long
	// between two records of one answer.
	const hold, gap = 300 * time.Millisecond, 60 * time.Millisecond
	f := &fetchLinger{hold: hold, gap: gap}
	timed := func(partition int32) time.Duration {
		start := time.Now()
		f.OnConsume(&sarama.ConsumerMessage{Topic: "t", Partition: partition, Timestamp: start})
		return time.Since(start)
	}
	if d := timed(0); d < hold {
		t.Fatalf("first record handed on after %s, want held %s", d, hold)
	}
	for i := range 5 {
		if d := timed(0); d > hold/4 {
			t.Fatalf("record %d of the held partition's answer waited %s, want none", i+2, d)
		}
	}
	time.Sleep(2 * gap) // the next fetch's round trip
	if d := timed(0); d < hold {
		t.Fatalf("first record of the next answer handed on after %s, want held %s", d, hold)
	}
	// While one partition's record is held, the others' records wait for the hold's end, so the
	// projector gets the answer at once.
	time.Sleep(2 * gap)
	held := make(chan time.Duration)
	go func() { held <- timed(1) }()
	time.Sleep(hold / 4)
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d := timed(int32(p + 2)); d < hold/2 || d > hold {
				t.Errorf("a record of partition %d during the hold waited %s, want the rest of the hold (about %s)", p+2, d, 3*hold/4)
			}
		}()
	}
	wg.Wait()
	if d := <-held; d < hold {
		t.Errorf("the holding record waited %s, want %s", d, hold)
	}
}

// TestFetchLingerHoldsNoRecordLongerThanTheLinger: a record is held until it is the linger old,
// not the linger from when it came. The answer right after a hold carries the records produced
// during it: it passes unheld, whichever partition's record comes first. An answer whose first
// record is older than the linger passes; one half the linger old is held the other half; one
// stamped ahead of this clock is held the linger, no longer.
func TestFetchLingerHoldsNoRecordLongerThanTheLinger(t *testing.T) {
	t.Parallel()
	const hold, gap = 400 * time.Millisecond, 60 * time.Millisecond
	f := &fetchLinger{hold: hold, gap: gap}
	timed := func(partition int32, age time.Duration) time.Duration {
		start := time.Now()
		f.OnConsume(&sarama.ConsumerMessage{Topic: "t", Partition: partition, Timestamp: start.Add(-age)})
		return time.Since(start)
	}
	// A record of another partition that comes during a hold waits for its end, unless it is
	// the linger old already.
	held := make(chan time.Duration)
	go func() { held <- timed(0, 0) }()
	time.Sleep(hold / 4)
	if d := timed(5, 2*hold); d > hold/8 {
		t.Fatalf("a record older than the linger waited %s during a hold, want none", d)
	}
	if d := <-held; d < hold {
		t.Fatalf("first record handed on after %s, want held %s", d, hold)
	}
	// The next fetch, answered at once, with records of other partitions produced during the hold.
	for p := range 4 {
		if d := timed(int32(p+1), hold/2); d > hold/8 {
			t.Fatalf("a record of partition %d produced during the hold waited %s more, want none", p+1, d)
		}
	}
	time.Sleep(2 * gap)
	if d := timed(3, 2*hold); d > hold/8 {
		t.Fatalf("a record older than the linger waited %s, want none", d)
	}
	time.Sleep(2 * gap)
	if d := timed(2, hold/2); d < hold/2-hold/8 || d > hold/2+hold/8 {
		t.Fatalf("a record half the linger old waited %s, want about %s", d, hold/2)
	}
	time.Sleep(2 * gap)
	if d := timed(1, -time.Hour); d < hold || d > hold+hold/4 {
		t.Fatalf("a record stamped an hour ahead waited %s, want %s", d, hold)
	}
	// Records that never stop coming, each within the gap of the one before (a consumer that
	// always finds records waiting), pass for the linger after the hold ended; then one is held.
	start := time.Now()
	for {
		d := timed(0, 0)
		if d >= hold/2 {
			if since := time.Since(start) - d; since < hold-hold/8 {
				t.Fatalf("a record %s after the last hold was held, want none before %s", since, hold)
			}
			break
		}
		if time.Since(start) > 3*hold {
			t.Fatal("a stream of records within the gap was never held")
		}
		time.Sleep(gap / 6)
	}
}
