package ws

import (
	"sync/atomic"
	"time"
)

// roundWorkerIdle is how long a reading-round goroutine waits for the next round before it ends.
const roundWorkerIdle = 5 * time.Second

// rounds runs polled sessions' reading rounds on goroutines that wait a little for the next
// round after theirs. A new goroutine starts with a small stack and grows it through the frame
// handlers' deep calls, copying it each time (about 3% of the node's CPU at 100 messages/s); a
// goroutine that waits has grown it already. A waiting goroutine belongs to no session, so an
// idle connection still holds none; as many wait as rounds ran at once lately, none once rounds
// stop for roundWorkerIdle or the gateway shuts down.
type rounds struct {
	work    chan func() // unbuffered: a send succeeds only when a goroutine waits
	stop    <-chan struct{}
	started atomic.Int64 // goroutines started
}

func newRounds(stop <-chan struct{}) *rounds {
	return &rounds{work: make(chan func()), stop: stop}
}

// run runs f on a waiting goroutine, or on a new one when none waits.
func (r *rounds) run(f func()) {
	select {
	case r.work <- f:
	default:
		r.started.Add(1)
		go r.worker(f)
	}
}

func (r *rounds) worker(f func()) {
	idle := time.NewTimer(roundWorkerIdle)
	defer idle.Stop()
	for {
		f()
		f = nil // drop the finished round's session while waiting
		idle.Reset(roundWorkerIdle)
		select {
		case f = <-r.work:
		case <-idle.C:
			return
		case <-r.stop:
			return
		}
	}
}
