package projections

import (
	"context"
	"sync"
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
	flush    func(ctx context.Context, items []*batchItem)
	wg       sync.WaitGroup
}

func newBatcher(max, flushers int, flush func(context.Context, []*batchItem)) *batcher {
	return &batcher{in: make(chan *batchItem, max), max: max, flushers: flushers, flush: flush}
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
	fill:
		for len(batch) < b.max {
			select {
			case it := <-b.in:
				batch = append(batch, it)
			default:
				break fill
			}
		}
		b.flush(ctx, batch)
	}
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
