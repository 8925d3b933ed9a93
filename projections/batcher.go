package projections

import (
	"context"
	"sync"
	"time"
)

// batchItem is one event waiting for its batch to be written.
type batchItem struct {
	env  envelope
	done chan result // buffered, receives exactly one result
}

// result is the outcome of one item. A panic of the applier is carried back to the handler's
// goroutine and re-raised there, so watermill's Recoverer middleware sees it.
type result struct {
	err      error
	panicked any
}

func (it *batchItem) finish(err error) { it.done <- result{err: err} }

// batcher is a group commit: handlers submit events and wait; flusher goroutines take
// everything that queued up while the previous batch was written and write it as one batch.
// Under load a batch holds one event per partition in flight; when idle an event is written
// alone, without waiting for company.
type batcher struct {
	in       chan *batchItem
	max      int
	flushers int
	linger   time.Duration
	flush    func(ctx context.Context, items []*batchItem)
	wg       sync.WaitGroup
}

func newBatcher(max, flushers int, linger time.Duration, flush func(context.Context, []*batchItem)) *batcher {
	return &batcher{in: make(chan *batchItem, max), max: max, flushers: flushers, linger: linger, flush: flush}
}

// start runs the flushers until ctx ends. Items queued when ctx ends are failed with its error.
func (b *batcher) start(ctx context.Context) {
	for i := 0; i < b.flushers; i++ {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.loop(ctx)
		}()
	}
}

// wait blocks until every flusher has returned.
func (b *batcher) wait() { b.wg.Wait() }

func (b *batcher) loop(ctx context.Context) {
	batch := make([]*batchItem, 0, b.max)
	for {
		select {
		case <-ctx.Done():
			b.failQueued(ctx.Err())
			return
		case it := <-b.in:
			batch = append(batch[:0], it)
		}
		batch = b.fill(ctx, batch)
		b.flush(ctx, batch)
	}
}

// fill adds queued items to batch up to max. With a linger it keeps waiting for more while they
// keep coming: until linger has passed since the first item, or no item came for linger/8. A
// backlog, where every partition in flight has submitted, thus waits one short gap, and a
// trickle of sends from many partitions is written in few transactions.
func (b *batcher) fill(ctx context.Context, batch []*batchItem) []*batchItem {
	var deadline time.Time
	var gap *time.Timer
	if b.linger > 0 {
		deadline = time.Now().Add(b.linger)
	}
	for len(batch) < b.max {
		select {
		case it := <-b.in:
			batch = append(batch, it)
			continue
		default:
		}
		wait := time.Until(deadline)
		if b.linger <= 0 || wait <= 0 {
			break
		}
		wait = min(wait, b.linger/8)
		if gap == nil {
			gap = time.NewTimer(wait)
			defer gap.Stop()
		} else {
			gap.Reset(wait)
		}
		select {
		case it := <-b.in:
			batch = append(batch, it)
		case <-gap.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

func (b *batcher) failQueued(err error) {
	for {
		select {
		case it := <-b.in:
			it.finish(err)
		default:
			return
		}
	}
}

// submit queues env and waits for its result. It returns ctx's error if ctx ends first; the
// event may still be written then, which consumers tolerate (at-least-once).
func (b *batcher) submit(ctx context.Context, env envelope) error {
	it := &batchItem{env: env, done: make(chan result, 1)}
	select {
	case b.in <- it:
	case <-ctx.Done():
		return ctx.Err()
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
