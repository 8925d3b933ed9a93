package projections

import (
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// answerGap tells the records of one fetch answer from the next answer's: Sarama hands the
// records of one answer on one after another, microseconds apart, while the next answer comes at
// least a fetch round trip later. A feeder held up longer than the gap within an answer has its
// next record taken for a new answer's first, which costs little: that record is as old as the
// answer, and a record is held only until it is hold old. An answer that comes within the gap
// passes with the one before it, for up to hold after a hold ended (so a consumer that always
// finds records waiting still holds about every other hold); that only moves a fetch. The gap is
// wide enough for a loaded machine.
const answerGap = 5 * time.Millisecond

// fetchLinger spaces a consumer's fetches without delaying a record by more than hold after it
// was produced. Sarama hands every record of a fetch answer to its partition's channel, through
// the consumer's interceptors, and sends the next fetch only once all of them were handed on.
// fetchLinger holds the first record of an answer until it is hold old (its timestamp, the
// relay's produce time, plus hold; never longer than hold from now, so a producer's clock ahead
// of this one's costs no more). The records of the other partitions that come during the hold
// wait for its end (or until they are hold old, if sooner), so the projector gets the answer at
// once and writes it in one batch; every record that comes within the gap of the one before
// passes. So the answer after an idle spell, which the broker sends at the first record (fetch
// min bytes 1), is handed on hold later; the next fetch, answered at once, carries the records
// of that time, which pass unheld, none of them older than hold; the fetch after that waits in
// the broker for the next record. Under light traffic a projector fetches about twice per hold
// and an event waits up to hold; a consumer behind by more than hold holds nothing; an idle one
// waits in the broker's long poll. One fetchLinger serves one consumer group (its Sarama
// configuration).
type fetchLinger struct {
	hold time.Duration
	gap  time.Duration // answerGap; tests set their own

	mu    sync.Mutex
	until time.Time // the end of the current hold
	last  time.Time // when the last record was handed on
}

// OnConsume implements sarama.ConsumerInterceptor. It runs on the partition's feeder goroutine.
func (f *fetchLinger) OnConsume(m *sarama.ConsumerMessage) {
	f.mu.Lock()
	now := time.Now()
	wait := f.hold // until m is hold old, never longer than hold from now
	if !m.Timestamp.IsZero() {
		wait = min(max(m.Timestamp.Add(f.hold).Sub(now), 0), f.hold)
	}
	switch {
	case now.Before(f.until): // another partition's record during a hold goes with the held one
		wait = min(wait, f.until.Sub(now))
	case now.Sub(f.last) < f.gap && now.Sub(f.until) < f.hold: // the rest of an answer, or the next
		wait = 0
	default: // the first record of an answer
		f.until = now.Add(wait)
	}
	if wait <= 0 {
		f.last = now
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	time.Sleep(wait)
	f.mu.Lock()
	f.last = time.Now()
	f.mu.Unlock()
}
