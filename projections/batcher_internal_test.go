package projections

import (
	"context"
	"sync"
	"testing"
	"time"
)

// flushLog records the size of every batch a batcher writes.
type flushLog struct {
	mu    sync.Mutex
	sizes []int
}

func (l *flushLog) flush(_ context.Context, items []*batchItem) {
	l.mu.Lock()
	l.sizes = append(l.sizes, len(items))
	l.mu.Unlock()
	for _, it := range items {
		it.finish(nil)
	}
}

func (l *flushLog) get() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.sizes...)
}

// submitSpaced submits n events from n goroutines, one every spacing, and waits for all of them.
func submitSpaced(t *testing.T, b *batcher, n int, spacing time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.submit(context.Background(), envelope{}, nil); err != nil {
				t.Errorf("submit: %v", err)
			}
		}()
		time.Sleep(spacing)
	}
	wg.Wait()
}

// startBatcher runs a batcher of up to 100 events with one flusher and linger until the test
// ends, and returns it with the log of its flushes.
func startBatcher(t *testing.T, linger time.Duration) (*batcher, *flushLog) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := &flushLog{}
	b := newBatcher(100, 1, linger, log.flush)
	b.start(ctx)
	return b, log
}

func TestBatcherLingerGathersATrickle(t *testing.T) {
	b, log := startBatcher(t, 400*time.Millisecond)
	// Ten events 10 ms apart: each gap is far below linger/8 (50 ms), so they wait for each
	// other and are written together, within the linger.
	start := time.Now()
	submitSpaced(t, b, 10, 10*time.Millisecond)
	if sizes := log.get(); len(sizes) > 2 {
		t.Fatalf("a trickle of 10 events was written in %d batches %v, want at most 2", len(sizes), sizes)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the trickle took %s", took)
	}
}

func TestBatcherLingerStopsAfterAGap(t *testing.T) {
	b, log := startBatcher(t, 800*time.Millisecond)
	// One event alone is written once nothing followed it for linger/8 (100 ms), well before
	// the linger (800 ms) is over.
	start := time.Now()
	submitSpaced(t, b, 1, 0)
	if took := time.Since(start); took >= 700*time.Millisecond {
		t.Fatalf("a lone event waited %s, want about linger/8", took)
	}
	if sizes := log.get(); len(sizes) != 1 || sizes[0] != 1 {
		t.Fatalf("batches %v, want [1]", sizes)
	}
}

func TestBatcherWithoutLingerWritesAtOnce(t *testing.T) {
	b, log := startBatcher(t, -1)
	submitSpaced(t, b, 5, 20*time.Millisecond)
	if sizes := log.get(); len(sizes) != 5 {
		t.Fatalf("5 events 20 ms apart without linger were written as %v, want 5 batches of 1", sizes)
	}
}
