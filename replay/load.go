package replay

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
)

// applyFunc writes a batch of one tenant's events and returns how many were new.
type applyFunc func(ctx context.Context, events []domain.Envelope) (int, error)

// load reads t's message events after position from events and writes them with apply in
// batches of about o.BatchSize events. Reading runs ahead of writing: while a batch is written
// the next one is read and gathered. With o.Workers > 1 a batch is split by conversation over
// that many concurrent apply calls, so each conversation's events stay in order. Events read are
// added to seen unless it is nil. It returns the events applied, the last position read and the
// events read.
func load(ctx context.Context, events EventReader, t domain.TenantID, after int64, o RebuildOptions, apply applyFunc, seen *recentEvents, bar ProgressTracker) (applied, last, read int64, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	shards := make([]chan []domain.Envelope, o.Workers)
	for i := range shards {
		shards[i] = make(chan []domain.Envelope, 1)
		wg.Add(1)
		go func(in <-chan []domain.Envelope) {
			defer wg.Done()
			for events := range in {
				if ctx.Err() != nil {
					continue
				}
				n, err := apply(ctx, events)
				if err != nil {
					cancel(err)
					continue
				}
				// The tracker is told under the lock: workers run at once, trackers need not
				// be safe for concurrent use.
				mu.Lock()
				applied += int64(n)
				if bar != nil {
					_ = bar.Add(len(events))
				}
				mu.Unlock()
			}
		}(shards[i])
	}
	dispatch := func(batch []domain.Envelope) error {
		for i, part := range splitByConversation(batch, o.Workers) {
			if len(part) == 0 {
				continue
			}
			select {
			case shards[i] <- part:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		return nil
	}
	last = after
	var pending []domain.Envelope
	readErr := readPages(ctx, events, MessageFilter(t), after, o.BatchSize, func(page []domain.Envelope) error {
		read += int64(len(page))
		last = page[len(page)-1].Position
		if seen != nil {
			seen.add(page)
		}
		if len(pending) == 0 && len(page) >= o.BatchSize {
			return dispatch(page) // a whole batch as read: no copy
		}
		if pending == nil {
			pending = make([]domain.Envelope, 0, max(o.BatchSize, len(page)))
		}
		pending = append(pending, page...)
		if len(pending) < o.BatchSize {
			return nil
		}
		batch := pending
		pending = nil
		return dispatch(batch)
	})
	if readErr == nil && len(pending) > 0 {
		readErr = dispatch(pending)
	}
	for _, c := range shards {
		close(c)
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return applied, last, read, err
	}
	return applied, last, read, readErr
}

// recentEvents remembers the ids of the events read within the last window positions of a
// load, so that the catch-up after a swap can skip the events the swapped-in tables hold.
type recentEvents struct {
	window int64
	pos    []int64 // ascending
	ids    []uuid.UUID
}

func (r *recentEvents) add(page []domain.Envelope) {
	for _, e := range page {
		r.pos = append(r.pos, e.Position)
		r.ids = append(r.ids, e.EventID)
	}
	if len(r.pos) == 0 {
		return
	}
	last := r.pos[len(r.pos)-1]
	stale := sort.Search(len(r.pos), func(i int) bool { return r.pos[i] > last-r.window })
	if stale > len(r.pos)/2 { // compact once at least half is out of the window
		r.pos = append(r.pos[:0], r.pos[stale:]...)
		r.ids = append(r.ids[:0], r.ids[stale:]...)
	}
}

// after returns the ids of the events read at positions above from.
func (r *recentEvents) after(from int64) map[uuid.UUID]bool {
	i := sort.Search(len(r.pos), func(i int) bool { return r.pos[i] > from })
	out := make(map[uuid.UUID]bool, len(r.pos)-i)
	for _, id := range r.ids[i:] {
		out[id] = true
	}
	return out
}

// splitByConversation splits events into n parts by a hash (32-bit FNV-1a) of their
// conversation key, keeping the order within each part. Each part is allocated once, at its size.
func splitByConversation(events []domain.Envelope, n int) [][]domain.Envelope {
	if n == 1 {
		return [][]domain.Envelope{events}
	}
	idx := make([]int32, len(events))
	sizes := make([]int, n)
	for k := range events {
		i := int(fnv32a(domain.ConversationKey(events[k].StreamID)) % uint32(n))
		idx[k] = int32(i)
		sizes[i]++
	}
	parts := make([][]domain.Envelope, n)
	for i, size := range sizes {
		parts[i] = make([]domain.Envelope, 0, size)
	}
	for k := range events {
		parts[idx[k]] = append(parts[idx[k]], events[k])
	}
	return parts
}

// fnv32a is the 32-bit FNV-1a hash of s (hash/fnv's New32a, without allocating).
func fnv32a(s string) uint32 {
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= prime
	}
	return h
}

// readPages reads the events of filter after position in pages of up to limit events (the store
// may cap a page lower) and hands each page to apply, in order. Reading runs two pages ahead of
// apply.
func readPages(ctx context.Context, events EventReader, filter domain.EventFilter, after int64, limit int, apply func([]domain.Envelope) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan []domain.Envelope, 2)
	readErr := make(chan error, 1)
	go func() {
		defer close(pages)
		pos := after
		for {
			page, err := events.ReadAll(ctx, filter, pos, limit)
			if err != nil {
				readErr <- fmt.Errorf("read events after position %d: %w", pos, err)
				return
			}
			if len(page) == 0 {
				return
			}
			pos = page[len(page)-1].Position
			select {
			case pages <- page:
			case <-ctx.Done():
				return
			}
		}
	}()
	for page := range pages {
		if err := apply(page); err != nil {
			return err
		}
	}
	select {
	case err := <-readErr:
		return err
	default:
		return ctx.Err()
	}
}

// pass reads the events of filter after position in pages of up to limit events (readPages) and
// hands each page to apply, which returns how many of its events were new to the read model.
// Each page read is told to bar and added to seen, either of which may be nil. It returns the
// events applied and read and the last position read (after, when it read none).
func pass(ctx context.Context, events EventReader, filter domain.EventFilter, after int64, limit int, bar ProgressTracker,
	seen *recentEvents, apply func([]domain.Envelope) (int, error)) (filled, error) {
	f := filled{last: after}
	err := readPages(ctx, events, filter, after, limit, func(page []domain.Envelope) error {
		n, err := apply(page)
		if err != nil {
			return err
		}
		f.applied += int64(n)
		f.read += int64(len(page))
		f.last = page[len(page)-1].Position
		if seen != nil {
			seen.add(page)
		}
		if bar != nil {
			_ = bar.Add(len(page))
		}
		return nil
	})
	return f, err
}
