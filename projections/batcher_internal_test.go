package projections

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

// submit is submitItem of env.
func (b *batcher) submit(ctx context.Context, env envelope, queued func()) error {
	return b.submitItem(ctx, &batchItem{env: env}, queued)
}

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

// convItem is a batch item of conversation conv at offset off.
func convItem(conv string, off int64) envelope {
	return envelope{src: source{Topic: "t", Offset: off}, Envelope: domain.Envelope{TenantID: domain.MustTenantID("acme"), StreamID: conv}}
}

// A transient failure is retried by the batcher itself, in order, and holds up only the
// conversation that failed; events of that conversation submitted meanwhile wait behind it.
func TestBatcherRetriesTransientFailuresInOrder(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu      sync.Mutex
		order   []int64 // offsets of conversation "a" in the order they were applied
		failing = true
	)
	flush := func(_ context.Context, items []*batchItem) {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range items {
			if it.env.StreamID == "a" && failing {
				it.finish(domain.Retryable("test", errors.New("store down")))
				continue
			}
			if it.env.StreamID == "a" {
				order = append(order, it.env.src.Offset)
			}
			it.finish(nil)
		}
	}
	b := newBatcher(100, 1, -1, flush)
	b.backoff = func(int) time.Duration { return 20 * time.Millisecond }
	b.start(ctx)
	var wg sync.WaitGroup
	submit := func(env envelope) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.submit(ctx, env, nil); err != nil {
				t.Errorf("submit %s/%d: %v", env.StreamID, env.src.Offset, err)
			}
		}()
	}
	submit(convItem("a", 1))
	time.Sleep(30 * time.Millisecond)
	if err := b.submit(ctx, convItem("b", 2), nil); err != nil {
		t.Fatalf("another conversation waited on the failing one: %v", err)
	}
	submit(convItem("a", 3))
	time.Sleep(10 * time.Millisecond)
	submit(convItem("a", 4))
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	failing = false
	mu.Unlock()
	wg.Wait()
	if want := []int64{1, 3, 4}; !reflect.DeepEqual(order, want) {
		t.Fatalf("conversation a applied at offsets %v, want %v", order, want)
	}
}

// A permanent failure answers the failed event and holds the conversation's later events until
// the failed one is resolved (dead-lettered); then they go on, in order.
func TestBatcherHoldsAConversationBehindAFailedEvent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu    sync.Mutex
		order []int64
	)
	boom := errors.New("bad row")
	flush := func(_ context.Context, items []*batchItem) {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range items {
			if it.env.src.Offset == 1 {
				it.finish(boom)
				continue
			}
			order = append(order, it.env.src.Offset)
			it.finish(nil)
		}
	}
	b := newBatcher(100, 1, -1, flush)
	b.start(ctx)
	if err := b.submit(ctx, convItem("a", 1), nil); !errors.Is(err, boom) {
		t.Fatalf("failed event: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.submit(ctx, convItem("a", 2), nil) }()
	select {
	case err := <-done:
		t.Fatalf("the next event of the conversation was answered (%v) before the failed one was resolved", err)
	case <-time.After(100 * time.Millisecond):
	}
	first := convItem("a", 1)
	b.resolve(first.key(), first.src)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := []int64{2}; !reflect.DeepEqual(order, want) {
		t.Fatalf("applied %v, want %v", order, want)
	}
}
