package message

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/redisscript"
)

// The sequencer: every topic maps to one partition goroutine, which takes whatever is queued (up
// to MaxBatch sends) and runs one batch at a time:
//
//	Redis pipeline: claim + allocate a seq per send (seed missing counters from the store)
//	→ one AppendBatch transaction (seq = stream version); a batch the store refuses for its
//	  data is split until the sends at fault are alone, and only they fail
//	→ sends whose seq was taken: re-seed from the store, new seq, append again (bounded)
//	→ the commit listener (realtime fanout), the hole recorder
//	→ answer the callers
//	→ Redis pipeline: mark the claims done (together with the next batch's allocations: a
//	  partition with nothing queued waits up to DoneLinger for the next send before it marks
//	  them in a round trip of their own, so light traffic pays one Redis round trip per send,
//	  not two).
//
// A caller is answered as soon as its event is committed. An identical send arriving before the
// done mark finds the claim pending and polls it until the mark lands (see awaitClaim), so the
// early answer never yields a second message.
//
// Because a partition allocates a batch only after the previous one committed, and the halves
// of a split batch commit in order, a topic's seqs are committed in seq order on this node, and
// the relay publishes them in that order.

// partition is one sequencer goroutine and its queue.
type partition struct {
	queue  chan *sendRequest
	linger *time.Timer // DoneLinger's wait for a next send; stopped when idle
}

// sendRequest is one attempt of a send travelling through a partition.
type sendRequest struct {
	ctx      context.Context
	cmd      *SendMessage
	key      seq.Key
	nonce    string           // names this attempt in its claim
	takeOver seq.Claim        // the pending claim of an abandoned attempt this one may take over; zero for none
	reply    chan sendOutcome // buffered: the partition never blocks on a caller

	// Set while the batch is processed.
	seq      int64 // the seq this attempt holds (allocated, not found taken); 0 for none
	replaced int64 // the seq of the abandoned attempt it took over, a hole unless that one committed
	id       uuid.UUID
	sentAt   time.Time
	result   SendResult
	appended bool   // committed by this attempt (not an earlier identical send)
	route    *Route // read by the Router in the allocate round trip; nil for none
	err      error  // why it failed, once it has
}

// topic is the conversation r writes to.
func (r *sendRequest) topic() TopicRef { return TopicRef{Tenant: r.cmd.Tenant, Topic: r.cmd.Topic} }

// sendOutcome is what a partition answers: a result, "an identical send holds the claim" (with
// the claim), or an error.
type sendOutcome struct {
	result  SendResult
	pending bool
	claim   seq.Claim
	err     error
}

// answer replies to a request that is finished with its claim: it lands (see fly).
func (h *SendMessageHandler) answer(r *sendRequest, o sendOutcome) {
	h.land(r)
	r.reply <- o
}

func (h *SendMessageHandler) fail(r *sendRequest, err error) { h.answer(r, sendOutcome{err: err}) }

// fly records r's attempt as in flight on this node until it lands: from before it can take its
// claim until its claim is marked done or failed, or it is answered without one. A pending claim
// of this node whose attempt is not in flight is abandoned (a lost Redis reply, a lost failed
// mark), and a retry takes it over at once.
func (h *SendMessageHandler) fly(r *sendRequest)  { h.flights.Store(r.nonce, struct{}{}) }
func (h *SendMessageHandler) land(r *sendRequest) { h.flights.Delete(r.nonce) }

// inFlight reports whether this node's attempt nonce is in flight.
func (h *SendMessageHandler) inFlight(nonce string) bool {
	_, ok := h.flights.Load(nonce)
	return ok
}

func (h *SendMessageHandler) startPartitions() {
	h.parts = make([]*partition, h.cfg.Partitions)
	for i := range h.parts {
		p := &partition{queue: make(chan *sendRequest, h.cfg.QueueSize), linger: time.NewTimer(time.Hour)}
		p.linger.Stop()
		h.parts[i] = p
		h.wg.Add(1)
		go h.runPartition(p)
	}
}

// route picks the partition of a tenant's topic.
func (h *SendMessageHandler) route(cmd *SendMessage) *partition {
	f := fnv.New32a()
	_, _ = f.Write([]byte(cmd.Tenant.String()))
	_, _ = f.Write([]byte{0})
	_, _ = f.Write([]byte(cmd.Topic.String()))
	return h.parts[f.Sum32()%uint32(len(h.parts))]
}

// submit queues an attempt of the send on its partition and waits for the answer. takeOver is
// the pending claim of an abandoned attempt it may take over (zero for none).
func (h *SendMessageHandler) submit(ctx context.Context, cmd *SendMessage, takeOver seq.Claim) (sendOutcome, error) {
	r := &sendRequest{ctx: ctx, cmd: cmd, key: keyOf(cmd), nonce: h.seqs.NewNonce(), takeOver: takeOver,
		reply: make(chan sendOutcome, 1)}
	if err := h.enqueue(ctx, r); err != nil {
		return sendOutcome{}, err
	}
	select {
	case o := <-r.reply:
		return o, o.err
	case <-ctx.Done():
		return sendOutcome{}, ctx.Err()
	}
}

// enqueue puts r on its partition's queue, waiting for room until ctx ends or Close starts. No
// lock is held while it waits, so Close never waits for a caller blocked on a full queue.
func (h *SendMessageHandler) enqueue(ctx context.Context, r *sendRequest) error {
	h.mu.RLock()
	if h.closed {
		h.mu.RUnlock()
		return domain.Retryable("send message", ErrClosed)
	}
	h.enqueuing.Add(1)
	h.mu.RUnlock()
	defer h.enqueuing.Done()
	h.fly(r)
	select {
	case h.route(r.cmd).queue <- r:
		return nil
	case <-ctx.Done():
		h.land(r)
		return ctx.Err()
	case <-h.closing:
		h.land(r)
		return domain.Retryable("send message", ErrClosed)
	}
}

// runPartition processes batches until the queue is closed and drained. The sends a batch
// committed are answered at once and marked done in the same Redis round trip that starts the
// next batch (or alone when none comes within DoneLinger).
func (h *SendMessageHandler) runPartition(p *partition) {
	defer h.wg.Done()
	var committed []*sendRequest
	for {
		batch, open := h.take(p, len(committed) > 0)
		if !open && len(batch) == 0 && len(committed) == 0 {
			return
		}
		committed = h.processBatch(committed, batch)
	}
}

// take returns up to MaxBatch queued sends. With no done marks waiting (marking false) it waits
// for the first send; with marks waiting it waits up to DoneLinger for one, so the marks travel
// with its allocation, and returns an empty batch if none came. open is false once the queue is
// closed and empty.
func (h *SendMessageHandler) take(p *partition, marking bool) (batch []*sendRequest, open bool) {
	first, open, ok := h.first(p, marking)
	if !ok {
		return nil, open
	}
	batch = append(batch, first)
	for len(batch) < h.cfg.MaxBatch {
		select {
		case r, ok := <-p.queue:
			if !ok {
				return batch, false
			}
			batch = append(batch, r)
		default:
			return batch, true
		}
	}
	return batch, true
}

// first waits for the next queued send as take describes; ok reports whether one came.
func (h *SendMessageHandler) first(p *partition, marking bool) (r *sendRequest, open, ok bool) {
	if !marking {
		r, ok = <-p.queue
		return r, ok, ok
	}
	select {
	case r, ok = <-p.queue:
		return r, ok, ok
	default:
	}
	if h.cfg.DoneLinger <= 0 {
		return nil, true, false
	}
	p.linger.Reset(h.cfg.DoneLinger)
	defer p.linger.Stop()
	select {
	case r, ok = <-p.queue:
		return r, ok, ok
	case <-p.linger.C:
		return nil, true, false
	}
}

// processBatch marks the previous batch's committed sends done, then runs one group commit for
// batch, tells the commit listener, answers its committed sends and returns them. Callers that
// gave up are dropped before any work is done. The work runs under a context of its own, bounded
// by BatchTimeout: one caller leaving must not abort the others' sends.
func (h *SendMessageHandler) processBatch(prev, batch []*sendRequest) []*sendRequest {
	live := make([]*sendRequest, 0, len(batch))
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			h.fail(r, err)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 && len(prev) == 0 {
		return nil
	}
	first := prev
	if len(live) > 0 {
		first = live
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(first[0].ctx), h.cfg.BatchTimeout)
	defer cancel()
	if len(live) > 0 {
		h.metrics.batch.Observe(float64(len(live)))
	}
	start := time.Now()
	allocated := h.allocate(ctx, prev, live)
	since(h.metrics.allocate, start)
	for _, r := range prev {
		h.land(r) // its done mark was written (or lost: a retry then takes the claim over)
	}
	if len(allocated) == 0 {
		return nil
	}
	start = time.Now()
	committed := h.commit(ctx, allocated)
	since(h.metrics.append, start)
	h.notifyCommitted(ctx, committed)
	h.recordHoles(ctx, allocated)
	for _, r := range committed {
		r.reply <- sendOutcome{result: r.result} // lands after its done mark
	}
	return committed
}

// maxSeedRounds bounds how often one batch seeds missing counters (Redis losing them again
// between seeding and allocating).
const maxSeedRounds = 3

// allocate marks prev done, claims and allocates a seq for every request of reqs (taking over
// the claims of abandoned attempts where asked), answers those that are already held or failed,
// and returns the requests that got a seq.
func (h *SendMessageHandler) allocate(ctx context.Context, prev, reqs []*sendRequest) []*sendRequest {
	var out []*sendRequest
	ride, routed := h.routes(reqs)
	for round := 1; len(reqs) > 0 || len(prev) > 0; round++ {
		asks := make([]seq.Request, len(reqs))
		for i, r := range reqs {
			asks[i] = seq.Request{Key: r.key, Nonce: r.nonce, TakeOver: r.takeOver.Owner.Nonce}
		}
		allocs := h.markDoneAndAllocate(ctx, prev, asks, ride)
		if ride != nil {
			routed()
			ride = nil // the first round's reads serve the seeded rounds too
		}
		prev = nil
		var unseeded []*sendRequest
		for i, a := range allocs {
			r := reqs[i]
			switch {
			case a.Err != nil:
				h.fail(r, a.Err)
			case a.Outcome == seq.Allocated:
				r.seq = a.Seq
				if r.takeOver.State == seq.StatePending {
					r.replaced = r.takeOver.Seq
				}
				out = append(out, r)
			case a.Outcome == seq.NeedsSeed:
				unseeded = append(unseeded, r)
			case a.Claim.State == seq.StateDone:
				h.answer(r, sendOutcome{result: claimResult(a.Claim)})
			default:
				h.answer(r, sendOutcome{pending: true, claim: a.Claim})
			}
		}
		if len(unseeded) == 0 {
			break
		}
		err := h.seed(ctx, unseeded)
		if err == nil && round == maxSeedRounds {
			err = domain.Retryable("allocate seq", errors.New("seq counter keeps disappearing"))
		}
		if err != nil {
			for _, r := range unseeded {
				h.fail(r, err)
			}
			break
		}
		reqs = unseeded
	}
	return out
}

// routes returns what rides on the allocate round trip of reqs: the Router's reads of their
// topics' routes, and the function that gives each request its topic's route once the round trip
// is back. Both are nil without a Router or requests.
func (h *SendMessageHandler) routes(reqs []*sendRequest) (ride func(*redisscript.Batch), routed func()) {
	if h.router == nil || len(reqs) == 0 {
		return nil, nil
	}
	var topics []TopicRef
	index := make(map[TopicRef]int, len(reqs))
	at := make([]int, len(reqs))
	for i, r := range reqs {
		t := r.topic()
		n, ok := index[t]
		if !ok {
			n = len(topics)
			index[t] = n
			topics = append(topics, t)
		}
		at[i] = n
	}
	var read func() []*Route
	ride = func(b *redisscript.Batch) { read = h.router.QueueRoutes(b, topics) }
	routed = func() {
		if read == nil {
			return
		}
		routes := read()
		for i, r := range reqs {
			if at[i] < len(routes) {
				r.route = routes[at[i]]
			}
		}
	}
	return ride, routed
}

// markDoneAndAllocate marks the committed sends done and allocates for reqs in one round trip.
// A failed done mark is only logged: the events are committed, and a retry that finds the claim
// still pending takes it over (at once on this node, where the attempt has landed; elsewhere
// once the claim expires or this node's heartbeat lapses) and is answered by the store's
// idempotency index.
func (h *SendMessageHandler) markDoneAndAllocate(ctx context.Context, committed []*sendRequest, reqs []seq.Request,
	ride func(*redisscript.Batch)) []seq.Allocation {
	done := make([]seq.Done, len(committed))
	for i, r := range committed {
		done[i] = seq.Done{Key: r.key, Seq: r.result.Seq, MessageID: r.result.MessageID, SentAt: r.result.SentAt}
	}
	allocs, err := h.seqs.MarkDoneAndAllocate(ctx, done, reqs, ride)
	if err != nil {
		h.log.WarnContext(ctx, "mark sends done", slog.Int("sends", len(done)), slog.Any("error", err))
	}
	return allocs
}

// floors reads the highest stored seq of every topic the requests write to.
func (h *SendMessageHandler) floors(ctx context.Context, reqs []*sendRequest) (map[TopicRef]int64, error) {
	out := make(map[TopicRef]int64)
	for _, r := range reqs {
		t := r.topic()
		if _, ok := out[t]; ok {
			continue
		}
		v, err := h.store.LastVersion(ctx, t.Tenant, t.Topic.String())
		if err != nil {
			return nil, retryable("read last seq", err)
		}
		out[t] = v
	}
	return out, nil
}

// seed sets the missing counters of the requests' topics from the event store.
func (h *SendMessageHandler) seed(ctx context.Context, reqs []*sendRequest) error {
	floors, err := h.floors(ctx, reqs)
	if err != nil {
		return err
	}
	topics := make([]seq.TopicFloor, 0, len(floors))
	for t, v := range floors {
		topics = append(topics, seq.TopicFloor{Tenant: t.Tenant, Topic: t.Topic, Floor: v})
	}
	return h.seqs.Seed(ctx, topics)
}
