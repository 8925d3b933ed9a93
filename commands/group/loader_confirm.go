package group

import (
	"context"
	"sync"
	"time"

	"github.com/imledger/imledger/domain"
)

// StreamConfirmer is a StreamReader that tells, in one round trip, which of many streams hold
// events above the versions a reader has (*eventstore.Store implements it). With one, a Loader
// confirms the states it reads ahead in batches: one query for every state that aged in a short
// window, instead of one read per state.
type StreamConfirmer interface {
	// StreamsMoved reports, for each i, whether stream streams[i] of tenants[i] holds an event
	// above versions[i].
	StreamsMoved(ctx context.Context, tenants []domain.TenantID, streams []string, versions []int64) ([]bool, error)
}

// confirmGather is the longest a read-ahead confirmation waits for others to share its query. A
// state is read ahead from three quarters of its maxAge on, so the wait is also kept below an
// eighth of the maxAge of the first state of a batch: the batch ends well before that state
// expires.
const confirmGather = 100 * time.Millisecond

// confirmReq is a cached state to confirm in the background: its entry, marked readingAhead.
type confirmReq struct {
	sh       *cacheShard
	key      stateKey
	e        *cacheEntry
	tenant   domain.TenantID
	stream   string
	maxAge   time.Duration
	fallback func(context.Context) // a load of the key that reads the store
}

// confirmQueue gathers confirmations for one batch at a time.
type confirmQueue struct {
	mu      sync.Mutex
	pending []confirmReq
	running bool
}

// confirmAhead queues r for the next batch, starting the batch's goroutine when none runs.
func (l *Loader) confirmAhead(r confirmReq) {
	l.aheadReads.Add(1)
	q := &l.confirms
	q.mu.Lock()
	q.pending = append(q.pending, r)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go l.runConfirms(min(confirmGather, r.maxAge/8))
	}
}

// runConfirms confirms the queued states a batch at a time, each batch after gathering for
// gather, until the queue is empty.
func (l *Loader) runConfirms(gather time.Duration) {
	for {
		time.Sleep(gather)
		q := &l.confirms
		q.mu.Lock()
		batch := q.pending
		q.pending = nil
		if len(batch) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		l.confirmBatch(batch)
		gather = confirmGather
		for _, r := range batch {
			gather = min(gather, r.maxAge/8)
		}
	}
}

// confirmBatch asks the store which of the batch's streams moved past the cached versions. A
// state whose stream did not move counts as verified when the query began, exactly as a read
// that began then and found nothing new, unless an invalidation crossed it (cacheShard.store
// decides); a stream that moved is read as before. Every entry's readingAhead is cleared.
func (l *Loader) confirmBatch(batch []confirmReq) {
	conf := l.store.(StreamConfirmer)
	var (
		reqs     []confirmReq
		starts   []readStart
		tenants  []domain.TenantID
		streams  []string
		versions []int64
		maxAge   = time.Duration(1<<63 - 1)
	)
	for _, r := range batch {
		r.sh.mu.RLock()
		e := r.sh.items[r.key]
		ok := e == r.e && e.state != nil && !e.stale
		if ok {
			starts = append(starts, readStart{at: l.clock(), entry: e, entryGen: e.gen, shardGen: r.sh.gen})
			versions = append(versions, e.version)
		}
		r.sh.mu.RUnlock()
		if !ok { // evicted or invalidated meanwhile: the next use reads it
			r.e.readingAhead.Store(false)
			continue
		}
		reqs = append(reqs, r)
		tenants, streams = append(tenants, r.tenant), append(streams, r.stream)
		maxAge = min(maxAge, r.maxAge)
	}
	if len(reqs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), maxAge)
	defer cancel()
	l.reads.Add(1)
	moved, err := conf.StreamsMoved(ctx, tenants, streams, versions)
	for i, r := range reqs {
		switch {
		case err != nil: // the state expires and its next use reads it
		case moved[i]:
			r.fallback(ctx)
		default:
			r.sh.mu.Lock()
			if e := r.sh.items[r.key]; e == r.e && e.version == versions[i] {
				r.sh.store(r.key, e.state, e.version, starts[i])
			}
			r.sh.mu.Unlock()
		}
		r.e.readingAhead.Store(false)
	}
}
