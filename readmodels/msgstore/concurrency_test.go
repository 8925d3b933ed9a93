package msgstore_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
)

// Projector workers apply different conversations of one tenant at once, and redeliveries overlap
// earlier batches. Whatever the interleaving, every message lands once and the read marks end at
// the highest seq each sender sent; a deadlock surfaces as a retryable error and a retry succeeds.
func TestConcurrentAppliesOfOneTenant(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	const workers, batches, size = 4, 10, 20
	var retries atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		topic := fmt.Sprintf("grp%d", w+1)
		var events []domain.Envelope
		for seq := int64(1); seq <= batches*size; seq++ {
			events = append(events, rmtest.Sent(t, f.tenant, topic, seq, domain.UserID(1+seq%5), "m"))
		}
		wg.Go(func() {
			for b := range batches {
				// Each batch also redelivers the second half of the previous one.
				from := max(b*size-size/2, 0)
				batch := events[from : (b+1)*size]
				for {
					_, err := f.store.Apply(ctx, f.tenant, group, f.tables, batch)
					if errors.Is(err, domain.ErrRetryable) {
						retries.Add(1)
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c, err := f.store.Counts(ctx, f.tenant, f.tables)
	if err != nil {
		t.Fatal(err)
	}
	if c.GroupMessages != workers*batches*size || c.ReadMarks != workers*5 {
		t.Fatalf("counts %+v", c)
	}
	for w := range workers {
		topic := rmtest.Topic(t, fmt.Sprintf("grp%d", w+1))
		// User 1 sent seqs ≡ 0 (mod 5); the highest is 200.
		m, found, err := f.store.ReadMarkOf(ctx, f.tenant, f.tables, 1, topic)
		if err != nil || !found || m.ReadSeq != batches*size {
			t.Fatalf("%s: user 1 read mark %+v %v %v", topic, m, found, err)
		}
	}
	t.Logf("retries after deadlocks or races: %d", retries.Load())
}
