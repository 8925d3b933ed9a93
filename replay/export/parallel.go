package export

import (
	"context"
	"sync"

	"github.com/imledger/imledger/commands/eventstore"
)

// Splitter is a Reader that can cut a range into stretches (*eventstore.Store): with one, an
// export reads Config.Readers stretches at once.
type Splitter interface {
	// Boundary returns the cursor of the n-th event of r after r.From (any tenant or type),
	// false when r holds fewer.
	Boundary(ctx context.Context, r eventstore.Range, n int) (eventstore.Cursor, bool, error)
}

// chunk is one stretch of the range and the pages read from it, in order.
type chunk struct {
	rng   eventstore.Range
	pages chan []eventstore.Record
	err   error // set before pages is closed
}

// scanParallel hands fn the events of f in rng in commit-safe order, like ScanCommitted, while
// readers stretches of about chunkEvents log events (consecutive, disjoint, together exactly
// rng) are read at once on connections of their own. At most readers stretches are read or
// buffered at a time, so memory holds about readers × chunkEvents events.
func scanParallel(ctx context.Context, r Reader, sp Splitter, rng eventstore.Range, f eventstore.Filter, page, readers, chunkEvents int,
	fn func([]eventstore.Record) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	tokens := make(chan struct{}, readers)
	order := make(chan *chunk, readers)
	splitErr := make(chan error, 1)
	var wg sync.WaitGroup
	go func() {
		defer close(order)
		from := rng.From
		for {
			select {
			case tokens <- struct{}{}:
			case <-ctx.Done():
				splitErr <- context.Cause(ctx) // the stretches after this one were never read
				return
			}
			c := &chunk{rng: eventstore.Range{From: from, To: rng.To, Horizon: rng.Horizon},
				pages: make(chan []eventstore.Record, chunkEvents/max(page, 1)+2)}
			end, ok, err := sp.Boundary(ctx, c.rng, chunkEvents)
			if err != nil {
				splitErr <- err
				return
			}
			last := !ok || (!rng.To.IsZero() && !end.Before(rng.To))
			if !last {
				c.rng.To = end
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(c.pages)
				c.err = r.ScanCommitted(ctx, c.rng, f, page, func(recs []eventstore.Record) error {
					select {
					case c.pages <- recs:
						return nil
					case <-ctx.Done():
						return context.Cause(ctx)
					}
				})
			}()
			order <- c
			if last {
				splitErr <- nil
				return
			}
			from = end
		}
	}()
	var err error
	for c := range order {
		for recs := range c.pages {
			if err == nil {
				if err = fn(recs); err != nil {
					cancel(err)
				}
			}
		}
		if err == nil && c.err != nil {
			err = c.err
			cancel(err)
		}
		<-tokens
	}
	wg.Wait()
	if serr := <-splitErr; err == nil && serr != nil {
		err = serr
	}
	return err
}
