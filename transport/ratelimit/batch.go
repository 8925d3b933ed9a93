package ratelimit

import (
	"context"
	_ "embed"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/redisscript"
)

var (
	//go:embed lua/gcra.lua
	gcraSrc    string
	gcraScript = redis.NewScript(gcraSrc)
)

// maxBatch bounds the checks of one pipelined round trip.
const maxBatch = 256

// aheadLinger is how long the worker of the background counts (later) waits for more of them
// before its round trip. A lease is counted ahead when a quarter of it is left, which lasts about
// half a second at the sender's rate (a lease is two seconds of its demand), so waiting costs the
// sender nothing, and a round trip carrying many counts costs the node and Redis a fraction of
// one per count.
const aheadLinger = 5 * time.Millisecond

// check is one counter to count against its limit.
type check struct {
	ctx   context.Context
	key   string   // in Redis
	lease leaseKey // of the send path's leases
	kind  domain.RateLimitKind
	limit int
	n     int  // requests to count at once
	whole bool // n is the send path's lease, which the send counts for its key
	done  chan error
	then  func(*check, error) // instead of done: called with the answer (later)
	got   int                 // requests counted, when allowed
}

// batcher counts the checks of concurrent sends in pipelined round trips, as the seq allocator
// allocates seqs: a worker takes every check queued while the previous round trip was in flight
// and sends them together, so under load a send costs a fraction of a round trip and an idle
// node waits for none. It is the send path's variant of the redis_rate limits: the same GCRA,
// per minute with a burst of one minute's limit, batched; its keys are
// <KeyPrefix><tenant>:rl:<kind>:{<subject>} (without redis_rate's "rate:").
type batcher struct {
	rdb   redis.UniversalClient
	reqs  chan *check // of sends waiting for their answer
	ahead chan *check // counted in the background (later), lingering for company
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

func newBatcher(rdb redis.UniversalClient, workers int) *batcher {
	b := &batcher{rdb: rdb, reqs: make(chan *check, 4*maxBatch), ahead: make(chan *check, 4*maxBatch), stop: make(chan struct{})}
	for range workers {
		b.wg.Add(1)
		go b.run()
	}
	b.wg.Add(1)
	go b.runAhead()
	return b
}

func (b *batcher) close() {
	b.once.Do(func() { close(b.stop) })
	b.wg.Wait()
}

// do queues checks and returns their answers in order. A check whose context ends first
// answers its context's error.
func (b *batcher) do(checks ...*check) []error {
	out := make([]error, len(checks))
	for _, c := range checks {
		c.done = make(chan error, 1)
		select {
		case b.reqs <- c:
		case <-c.ctx.Done():
			c.done <- domain.Retryable("rate limit", c.ctx.Err())
		case <-b.stop:
			c.done <- domain.Retryable("rate limit", errClosed)
		}
	}
	for i, c := range checks {
		select {
		case out[i] = <-c.done:
		case <-c.ctx.Done():
			out[i] = domain.Retryable("rate limit", c.ctx.Err())
		}
	}
	return out
}

// later queues c without waiting for its answer, which goes to c.then on a worker; a full queue
// or a closed batcher answers at once.
func (b *batcher) later(c *check) {
	select {
	case <-b.stop:
		c.then(c, domain.Retryable("rate limit", errClosed))
		return
	default:
	}
	select {
	case b.ahead <- c:
	default:
		c.then(c, domain.Retryable("rate limit", errQueueFull))
	}
}

func (b *batcher) run() {
	defer b.wg.Done()
	batch := make([]*check, 0, maxBatch)
	for {
		select {
		case <-b.stop:
			return
		case c := <-b.reqs:
			batch = append(batch[:0], c)
		}
	more:
		for len(batch) < maxBatch {
			select {
			case c := <-b.reqs:
				batch = append(batch, c)
			default:
				break more
			}
		}
		b.send(batch)
	}
}

// runAhead counts the background checks: from the first one queued it waits aheadLinger (or
// for a full batch) before the round trip.
func (b *batcher) runAhead() {
	defer b.wg.Done()
	batch := make([]*check, 0, maxBatch)
	linger := time.NewTimer(aheadLinger)
	linger.Stop()
	for {
		select {
		case <-b.stop:
			return
		case c := <-b.ahead:
			batch = append(batch[:0], c)
		}
		linger.Reset(aheadLinger)
	fill:
		for len(batch) < maxBatch {
			select {
			case c := <-b.ahead:
				batch = append(batch, c)
			case <-linger.C:
				break fill
			case <-b.stop:
				break fill
			}
		}
		linger.Stop()
		b.send(batch)
	}
}

// send runs batch in one pipeline (EVALSHA; EVAL again for a server that lost its script cache)
// and answers every check.
func (b *batcher) send(batch []*check) {
	// The round trip serves many callers: it is bounded by its own deadline, not one caller's.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].ctx), 5*time.Second)
	defer cancel()
	calls := make([]redisscript.Call, len(batch))
	for i, c := range batch {
		calls[i] = redisscript.Call{Script: gcraScript, Keys: []string{c.key},
			Args: []any{float64(time.Minute.Milliseconds()) / float64(c.limit), c.limit, max(c.n, 1)}}
	}
	// One round trip as EVALSHA; after a restart or SCRIPT FLUSH the NOSCRIPT ones go again as EVAL.
	cmds := redisscript.Run(ctx, b.rdb, calls, nil)
	for i, c := range batch {
		res, err := cmds[i].Int64Slice()
		switch {
		case err != nil:
			err = domain.Retryable("rate limit "+string(c.kind), err)
		case len(res) != 2:
			err = domain.Retryable("rate limit "+string(c.kind), errBadReply)
		case res[0] == 0:
			err = &domain.RateLimitedError{Limit: c.kind, RetryAfter: time.Duration(max(res[1], 1)) * time.Millisecond}
		default:
			c.got = int(res[0])
		}
		if c.then != nil {
			c.then(c, err)
		} else {
			c.done <- err
		}
	}
}

const (
	errClosed    = limiterError("rate limiter closed")
	errQueueFull = limiterError("rate-limit queue full")
	errBadReply  = limiterError("unexpected reply of the rate-limit script")
)

type limiterError string

func (e limiterError) Error() string { return string(e) }
