package projections

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// batchItem is one event waiting for its batch to be written.
type batchItem struct {
	env  envelope
	key  convKey
	done chan result // buffered, receives exactly one result
	// refused, when set, is the error the item fails with in its turn, without being applied:
	// an event this build cannot apply. In a parked conversation it is parked all the same.
	refused error

	res      result // set by the flush
	answered bool   // res is final
}

// result is the outcome of one item. A panic of the applier is carried back to the handler's
// goroutine and re-raised there, so watermill's Recoverer middleware sees it.
type result struct {
	err      error
	panicked any
}

// finish records the item's outcome; the batcher delivers it once the batch is done.
func (it *batchItem) finish(err error) { it.res, it.answered = result{err: err}, true }

// setResult records an outcome with a panic.
func (it *batchItem) setResult(r result) { it.res, it.answered = r, true }

// batcher is a group commit with per-conversation order. Handlers submit events and wait;
// each conversation is served by one shard (one flusher), which writes everything that queued up
// while its previous batch was written as one batch. A conversation's events therefore enter
// batches in submission order, and one batch commits before the next is written.
//
// A conversation whose event failed is blocked (a lane): its later events wait, unanswered,
// until the failed event is applied on a retry, dead-lettered (resolve), or, for a transient
// failure, retried by the batcher itself after a backoff. So a conversation's events are applied
// in order even with many of them in flight, and one failing conversation holds up no other.
type batcher struct {
	max     int
	linger  time.Duration
	flush   func(ctx context.Context, items []*batchItem)
	backoff func(attempt int) time.Duration
	// retried counts transient failures retried by the batcher; may be nil.
	retried func()
	seed    maphash.Seed
	shards  []*shard
	wg      sync.WaitGroup
}

// shard is the queue and the blocked conversations of one flusher.
type shard struct {
	b     *batcher
	mu    sync.Mutex
	queue []*batchItem
	lanes map[convKey]*lane
	wake  chan struct{}
	ctx   context.Context // set by start
	done  bool
}

// lane holds the events of a blocked conversation that wait behind a failed one.
type lane struct {
	// head is where the failed event was consumed from; its retry passes the lane. Zero for a
	// transient lane, whose events are retried by the batcher.
	head      source
	transient bool
	attempt   int
	timer     *time.Timer
	waiting   []*batchItem
}

func newBatcher(max, flushers int, linger time.Duration, flush func(context.Context, []*batchItem)) *batcher {
	b := &batcher{max: max, linger: linger, flush: flush, seed: maphash.MakeSeed(),
		backoff: func(attempt int) time.Duration { return min(100*time.Millisecond<<min(attempt, 6), 5*time.Second) }}
	for range flushers {
		b.shards = append(b.shards, &shard{b: b, lanes: map[convKey]*lane{}, wake: make(chan struct{}, 1)})
	}
	return b
}

func (b *batcher) shardOf(k convKey) *shard {
	if len(b.shards) == 1 {
		return b.shards[0]
	}
	var h maphash.Hash
	h.SetSeed(b.seed)
	h.WriteString(k.tenant)
	h.WriteByte(0)
	h.WriteString(k.conv)
	return b.shards[h.Sum64()%uint64(len(b.shards))]
}

// start runs the flushers until ctx ends. Items queued or waiting when ctx ends are failed with
// its error.
func (b *batcher) start(ctx context.Context) {
	for _, s := range b.shards {
		s.mu.Lock()
		s.ctx = ctx
		s.mu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			s.loop(ctx)
		}()
	}
}

// wait blocks until every flusher has returned.
func (b *batcher) wait() { b.wg.Wait() }

// submitItem queues the envelope of it and waits for its result; queued is called once the
// event holds its place in its conversation's order. It returns ctx's error if ctx ends first;
// the event may still be written then, which consumers tolerate (at-least-once).
func (b *batcher) submitItem(ctx context.Context, it *batchItem, queued func()) error {
	it.key, it.done = it.env.key(), make(chan result, 1)
	b.shardOf(it.key).add(it)
	if queued != nil {
		queued()
	}
	select {
	case r := <-it.done:
		if r.panicked != nil {
			panic(r.panicked)
		}
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// block marks k as blocked behind the record at head, which failed before it could be
// submitted (it does not decode). Later events of k wait until resolve(k, head).
func (b *batcher) block(k convKey, head source) {
	s := b.shardOf(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.lanes[k]; !ok {
		s.lanes[k] = &lane{head: head}
	}
}

// resolve releases the events waiting behind the failed record at head of k once that record is
// settled for good (dead-lettered): they are queued in order.
func (b *batcher) resolve(k convKey, head source) {
	s := b.shardOf(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.lanes[k]; ok && !l.transient && l.head == head {
		s.release(k, l)
	}
}

// add queues it, or parks it in its conversation's lane.
func (s *shard) add(it *batchItem) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		it.done <- result{err: context.Canceled}
		return
	}
	if l, ok := s.lanes[it.key]; ok && (l.transient || l.head != it.env.src) {
		l.waiting = append(l.waiting, it)
		s.mu.Unlock()
		return
	}
	s.queue = append(s.queue, it)
	s.mu.Unlock()
	s.notify()
}

func (s *shard) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// release queues the waiting events of lane l of k and drops the lane. Callers hold s.mu.
func (s *shard) release(k convKey, l *lane) {
	if l.timer != nil {
		l.timer.Stop()
	}
	delete(s.lanes, k)
	s.queue = append(s.queue, l.waiting...)
	if len(l.waiting) > 0 {
		s.notify()
	}
}

func (s *shard) loop(ctx context.Context) {
	var timer *time.Timer
	for {
		select {
		case <-ctx.Done():
			s.failAll(ctx.Err())
			return
		case <-s.wake:
		}
		if s.b.linger > 0 {
			timer = s.gather(ctx, timer)
		}
		for {
			batch := s.take()
			if len(batch) == 0 {
				break
			}
			s.b.flush(ctx, batch)
			s.settle(ctx, batch)
		}
	}
}

// gather waits while events keep coming, until linger has passed since the first or none came for
// linger/8, or the queue holds a full batch.
func (s *shard) gather(ctx context.Context, timer *time.Timer) *time.Timer {
	deadline := time.Now().Add(s.b.linger)
	for {
		s.mu.Lock()
		n := len(s.queue)
		s.mu.Unlock()
		wait := min(time.Until(deadline), s.b.linger/8)
		if n == 0 || n >= s.b.max || wait <= 0 {
			return timer
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-s.wake:
			timer.Stop()
		case <-timer.C:
			return timer
		case <-ctx.Done():
			timer.Stop()
			return timer
		}
	}
}

// take removes up to max items from the queue.
func (s *shard) take() []*batchItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(len(s.queue), s.b.max)
	if n == 0 {
		return nil
	}
	// The batch keeps the front of the queue's array; the queue goes on after it, so taking a
	// batch from a long queue moves nothing.
	batch := s.queue[:n:n]
	s.queue = s.queue[n:]
	if len(s.queue) == 0 {
		s.queue = nil
	}
	return batch
}

// settle answers the items of a written batch in order and blocks the conversations that failed.
// An item left unanswered by the flush (a later event of a conversation that failed in the same
// batch) waits in its conversation's lane.
func (s *shard) settle(ctx context.Context, batch []*batchItem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	blocked := false // a conversation was blocked by this batch
	defer func() {
		if blocked {
			s.holdQueued()
		}
	}()
	for _, it := range batch {
		l, isBlocked := s.lanes[it.key]
		switch {
		case !it.answered || (isBlocked && l.transient):
			if !isBlocked {
				// Unreachable by the flush contract; keep the order anyway.
				l = &lane{transient: true}
				s.lanes[it.key] = l
				s.schedule(it.key, l)
				blocked = true
			}
			l.waiting = append(l.waiting, it)
			continue
		case it.res.panicked == nil && it.res.err != nil && isTransient(it.res.err) && ctx.Err() == nil:
			if isBlocked {
				// The failed head's retry failed again: its handler retries.
				break
			}
			l = &lane{transient: true, waiting: []*batchItem{it}}
			s.lanes[it.key] = l
			s.schedule(it.key, l)
			blocked = true
			if s.b.retried != nil {
				s.b.retried()
			}
			continue
		case it.res.err != nil || it.res.panicked != nil:
			if !isBlocked {
				s.lanes[it.key] = &lane{head: it.env.src}
				blocked = true
			}
		case isBlocked && l.head == it.env.src:
			// The failed head applied on its retry: its conversation goes on.
			s.release(it.key, l)
		}
		it.done <- it.res
	}
}

// holdQueued moves queued events of blocked conversations into their lanes, in order: events
// that were queued while the batch that blocked their conversation was being written. Callers
// hold s.mu.
func (s *shard) holdQueued() {
	kept := s.queue[:0]
	for _, it := range s.queue {
		if l, ok := s.lanes[it.key]; ok && (l.transient || l.head != it.env.src) {
			l.waiting = append(l.waiting, it)
			continue
		}
		kept = append(kept, it)
	}
	clear(s.queue[len(kept):])
	s.queue = kept
}

// schedule queues the waiting events of transient lane l again after a backoff. Callers hold s.mu.
func (s *shard) schedule(k convKey, l *lane) {
	d := s.b.backoff(l.attempt)
	l.attempt++
	l.timer = time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.lanes[k] == l && !s.done {
			s.release(k, l)
		}
	})
}

// failAll answers every queued and waiting item with err and refuses later submissions.
func (s *shard) failAll(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	for _, it := range s.queue {
		it.done <- result{err: err}
	}
	s.queue = nil
	for k, l := range s.lanes {
		if l.timer != nil {
			l.timer.Stop()
		}
		for _, it := range l.waiting {
			it.done <- result{err: err}
		}
		delete(s.lanes, k)
	}
}
