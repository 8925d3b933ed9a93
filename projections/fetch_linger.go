package projections

import (
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// answerGap tells the records of one fetch answer from the next answer's: Sarama hands a
// partition's records of one answer on one after another, microseconds apart, while the next
// answer comes at least a fetch round trip later. A feeder held up longer than the gap within an
// answer has the rest of it held once more; an answer that comes within the gap and has records
// only of the partition held last passes unheld, and the one after it is held. Both only move a
// fetch, and the gap is wide enough for a loaded machine.
const answerGap = 5 * time.Millisecond

// fetchLinger spaces a consumer's fetches without delaying a record by more than hold. Sarama
// hands every record of a fetch answer to its partition's channel, through the consumer's
// interceptors, and sends the next fetch only once all of them were handed on. fetchLinger
// holds the first record of an answer for hold, and lets through the records of the other
// partitions that come during the hold and the rest of the held partition's answer; so the
// answer after an idle spell, which the broker sends at the first record (fetch min bytes 1), is
// handed on hold later, and the next fetch finds the records of that time waiting. Under light
// traffic a fetch carries hold's worth of records; at full load a consumer fetches about once
// per hold; an idle one waits in the broker's long poll, holding nothing. One fetchLinger serves
// one consumer group (its Sarama configuration).
type fetchLinger struct {
	hold time.Duration
	gap  time.Duration // answerGap; tests set their own

	mu    sync.Mutex
	until time.Time                  // the end of the current hold
	last  map[partitionKey]time.Time // when each partition last handed a record on
}

type partitionKey struct {
	topic     string
	partition int32
}

// OnConsume implements sarama.ConsumerInterceptor. It runs on the partition's feeder goroutine.
func (f *fetchLinger) OnConsume(m *sarama.ConsumerMessage) {
	k := partitionKey{m.Topic, m.Partition}
	f.mu.Lock()
	if f.last == nil {
		f.last = map[partitionKey]time.Time{}
	}
	now := time.Now()
	if now.Before(f.until) || now.Sub(f.last[k]) < f.gap {
		f.last[k] = now
		f.mu.Unlock()
		return
	}
	f.until = now.Add(f.hold)
	f.mu.Unlock()
	time.Sleep(f.hold)
	f.mu.Lock()
	f.last[k] = time.Now()
	f.mu.Unlock()
}
