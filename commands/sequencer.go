package commands

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/domain"
)

// The sequencer: every topic maps to one partition goroutine, which takes whatever is queued (up
// to MaxBatch sends) and runs one batch at a time:
//
//	Redis pipeline: claim + allocate a seq per send (seed missing counters from the store)
//	→ one AppendBatch transaction (seq = stream version)
//	→ sends whose seq was taken: re-seed from the store, new seq, append again (bounded)
//	→ answer the callers
//	→ Redis pipeline: mark the claims done (together with the next batch's allocations).
//
// A caller is answered as soon as its event is committed. An identical send arriving before the
// done mark finds the claim pending and polls it until the mark lands (see awaitClaim), so the
// early answer never yields a second message.
//
// Because a partition allocates a batch only after the previous one committed, a topic's seqs
// are committed in seq order on this node, and the relay publishes them in that order.

// partition is one sequencer goroutine and its queue.
type partition struct {
	queue chan *sendRequest
}

// sendRequest is one send travelling through a partition.
type sendRequest struct {
	ctx   context.Context
	cmd   *SendMessage
	key   seq.Key
	reply chan sendOutcome // buffered: the partition never blocks on a caller

	// Set while the batch is processed.
	seq    int64
	id     uuid.UUID
	sentAt time.Time
	result SendResult
}

// sendOutcome is what a partition answers: a result, "an identical send holds the claim", or an
// error.
type sendOutcome struct {
	result  SendResult
	pending bool
	err     error
}

func (r *sendRequest) answer(o sendOutcome) { r.reply <- o }
func (r *sendRequest) fail(err error)       { r.answer(sendOutcome{err: err}) }

func (h *SendMessageHandler) startPartitions() {
	h.parts = make([]*partition, h.cfg.Partitions)
	for i := range h.parts {
		p := &partition{queue: make(chan *sendRequest, h.cfg.QueueSize)}
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

// submit queues a send on its partition and waits for the answer.
func (h *SendMessageHandler) submit(ctx context.Context, cmd *SendMessage) (sendOutcome, error) {
	r := &sendRequest{ctx: ctx, cmd: cmd, key: keyOf(cmd), reply: make(chan sendOutcome, 1)}
	h.mu.RLock()
	if h.closed {
		h.mu.RUnlock()
		return sendOutcome{}, domain.Retryable("send message", ErrClosed)
	}
	select {
	case h.route(cmd).queue <- r:
		h.mu.RUnlock()
	case <-ctx.Done():
		h.mu.RUnlock()
		return sendOutcome{}, ctx.Err()
	}
	select {
	case o := <-r.reply:
		return o, o.err
	case <-ctx.Done():
		return sendOutcome{}, ctx.Err()
	}
}

// runPartition processes batches until the queue is closed and drained. The sends a batch
// committed are answered at once and marked done in the same Redis round trip that starts the
// next batch (or alone when nothing is queued).
func (h *SendMessageHandler) runPartition(p *partition) {
	defer h.wg.Done()
	var committed []*sendRequest
	for {
		batch, open := h.take(p, len(committed) == 0)
		if !open && len(batch) == 0 && len(committed) == 0 {
			return
		}
		committed = h.processBatch(committed, batch)
	}
}

// take returns up to MaxBatch queued sends, waiting for the first one when wait is set. open is
// false once the queue is closed and empty.
func (h *SendMessageHandler) take(p *partition, wait bool) (batch []*sendRequest, open bool) {
	if wait {
		r, ok := <-p.queue
		if !ok {
			return nil, false
		}
		batch = append(batch, r)
	}
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

// processBatch marks the previous batch's committed sends done, then runs one group commit for
// batch, answers its committed sends and returns them. Callers that gave up are dropped
// before any work is done. The work runs under a context of its own, bounded by BatchTimeout:
// one caller leaving must not abort the others' sends.
func (h *SendMessageHandler) processBatch(prev, batch []*sendRequest) []*sendRequest {
	live := make([]*sendRequest, 0, len(batch))
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.fail(err)
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
	if len(allocated) == 0 {
		return nil
	}
	start = time.Now()
	committed := h.commit(ctx, allocated)
	since(h.metrics.append, start)
	for _, r := range committed {
		r.answer(sendOutcome{result: r.result})
	}
	return committed
}

// maxSeedRounds bounds how often one batch seeds missing counters (Redis losing them again
// between seeding and allocating).
const maxSeedRounds = 3

// allocate marks prev done, claims and allocates a seq for every request of reqs, answers those
// that are already held or failed, and returns the requests that got a seq.
func (h *SendMessageHandler) allocate(ctx context.Context, prev, reqs []*sendRequest) []*sendRequest {
	var out []*sendRequest
	for round := 1; len(reqs) > 0 || len(prev) > 0; round++ {
		keys := make([]seq.Key, len(reqs))
		for i, r := range reqs {
			keys[i] = r.key
		}
		allocs := h.markDoneAndAllocate(ctx, prev, keys)
		prev = nil
		var unseeded []*sendRequest
		for i, a := range allocs {
			r := reqs[i]
			switch {
			case a.Err != nil:
				r.fail(a.Err)
			case a.Outcome == seq.Allocated:
				r.seq = a.Seq
				out = append(out, r)
			case a.Outcome == seq.NeedsSeed:
				unseeded = append(unseeded, r)
			case a.Claim.State == seq.StateDone:
				r.answer(sendOutcome{result: claimResult(a.Claim)})
			default:
				r.answer(sendOutcome{pending: true})
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
				r.fail(err)
			}
			break
		}
		reqs = unseeded
	}
	return out
}

// markDoneAndAllocate marks the committed sends done and allocates for keys in one round trip.
// A failed done mark is only logged: the events are committed, and once the pending claims
// expire a retry is answered by the store's idempotency index.
func (h *SendMessageHandler) markDoneAndAllocate(ctx context.Context, committed []*sendRequest, keys []seq.Key) []seq.Allocation {
	done := make([]seq.Done, len(committed))
	for i, r := range committed {
		done[i] = seq.Done{Key: r.key, Seq: r.result.Seq, MessageID: r.result.MessageID, SentAt: r.result.SentAt}
	}
	allocs, err := h.seqs.MarkDoneAndAllocate(ctx, done, keys)
	if err != nil {
		h.log.WarnContext(ctx, "mark sends done", slog.Int("sends", len(done)), slog.Any("error", err))
	}
	return allocs
}

// topicOf identifies a conversation stream.
type topicOf struct {
	tenant domain.TenantID
	topic  domain.Topic
}

// floors reads the highest stored seq of every topic the requests write to.
func (h *SendMessageHandler) floors(ctx context.Context, reqs []*sendRequest) (map[topicOf]int64, error) {
	out := make(map[topicOf]int64)
	for _, r := range reqs {
		t := topicOf{r.cmd.Tenant, r.cmd.Topic}
		if _, ok := out[t]; ok {
			continue
		}
		v, err := h.store.LastVersion(ctx, t.tenant, t.topic.String())
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
		topics = append(topics, seq.TopicFloor{Tenant: t.tenant, Topic: t.topic, Floor: v})
	}
	return h.seqs.Seed(ctx, topics)
}

// commit appends the allocated requests, giving a new seq to those whose seq was already taken,
// and returns the requests that are committed (appended now or found as duplicates) with their
// results set. Every other request is answered with an error and its claim marked failed.
func (h *SendMessageHandler) commit(ctx context.Context, reqs []*sendRequest) []*sendRequest {
	var committed []*sendRequest
	for attempt := 1; len(reqs) > 0; attempt++ {
		events, reqs2 := h.envelopes(ctx, reqs)
		reqs = reqs2
		if len(reqs) == 0 {
			break
		}
		results, err := h.store.AppendBatch(ctx, events)
		if err == nil && len(results) != len(events) {
			err = errors.New("event store answered a different number of results")
		}
		if err != nil {
			h.abandon(ctx, reqs, retryable("append message", err))
			break
		}
		var taken []*sendRequest
		for i, res := range results {
			r := reqs[i]
			switch res.Status {
			case eventstore.Appended:
				r.result = SendResult{Seq: r.seq, MessageID: r.id.String(), SentAt: r.sentAt}
				committed = append(committed, r)
			case eventstore.Duplicate:
				r.result = storedResult(res.Existing)
				committed = append(committed, r)
			default:
				taken = append(taken, r)
			}
		}
		if len(taken) > 0 && attempt == h.cfg.MaxAppendAttempts {
			h.abandon(ctx, taken, domain.Retryable("append message", domain.ErrConcurrency))
			break
		}
		reqs = h.reallocate(ctx, taken)
	}
	return committed
}

// envelopes builds the sent event of every request at its current seq. The message id (= event
// id) and send time are chosen once per request and kept when a new seq is needed. A request
// whose envelope cannot be built is abandoned and left out.
func (h *SendMessageHandler) envelopes(ctx context.Context, reqs []*sendRequest) ([]domain.Envelope, []*sendRequest) {
	events := make([]domain.Envelope, 0, len(reqs))
	kept := make([]*sendRequest, 0, len(reqs))
	for _, r := range reqs {
		e, err := r.envelope()
		if err != nil {
			h.abandon(ctx, []*sendRequest{r}, fmt.Errorf("build message event: %w", err))
			continue
		}
		events = append(events, e)
		kept = append(kept, r)
	}
	return events, kept
}

// envelope builds the request's event at r.seq.
func (r *sendRequest) envelope() (domain.Envelope, error) {
	if r.id == uuid.Nil {
		id, err := uuid.NewV7()
		if err != nil {
			return domain.Envelope{}, err
		}
		// The store keeps microseconds; the answer must equal what a retry reads back.
		r.id, r.sentAt = id, time.Now().UTC().Truncate(time.Microsecond)
	}
	c := r.cmd
	p := domain.MessageSent{
		MessageID: r.id.String(), Topic: c.Topic.String(), Seq: r.seq, From: c.From,
		ClientMsgID: c.ClientMsgID.String(), MsgType: c.MsgType, Content: c.Content.Raw(),
		Head: c.Head, SentAt: r.sentAt,
	}
	if c.Topic.Kind() == domain.TopicGroup {
		p.GroupID = c.Topic.GroupID()
	} else {
		p.To = c.Topic.Peer(c.From)
	}
	e, err := domain.NewEnvelopeWithID(r.id, c.Tenant, c.Topic.String(), r.seq, domain.SentEventType(c.Topic.Kind()), c.Actor, p)
	if err != nil {
		return domain.Envelope{}, err
	}
	e.OccurredAt = r.sentAt
	e.TraceID = c.TraceID
	e.BizID = r.id.String()
	e.IdempotencyKey = idempotencyKey(c)
	return e, nil
}

// storedResult answers a send from the stored event of an earlier identical send.
func storedResult(e domain.Envelope) SendResult {
	res := SendResult{Seq: e.StreamVersion, MessageID: e.EventID.String(), Duplicate: true, SentAt: e.OccurredAt}
	var p domain.MessageSent
	if e.Decode(&p) == nil && p.MessageID != "" {
		res.MessageID, res.SentAt = p.MessageID, p.SentAt
	}
	return res
}

// reallocate gives a new seq above the store's highest one to requests whose seq was taken, and
// returns those that got one.
func (h *SendMessageHandler) reallocate(ctx context.Context, reqs []*sendRequest) []*sendRequest {
	if len(reqs) == 0 {
		return nil
	}
	floors, err := h.floors(ctx, reqs)
	if err != nil {
		h.abandon(ctx, reqs, err)
		return nil
	}
	rr := make([]seq.Realloc, len(reqs))
	for i, r := range reqs {
		rr[i] = seq.Realloc{Key: r.key, Floor: floors[topicOf{r.cmd.Tenant, r.cmd.Topic}]}
	}
	var out, failed []*sendRequest
	var firstErr error
	for i, a := range h.seqs.Reallocate(ctx, rr) {
		if a.Err != nil {
			failed = append(failed, reqs[i])
			if firstErr == nil {
				firstErr = a.Err
			}
			continue
		}
		reqs[i].seq = a.Seq
		out = append(out, reqs[i])
	}
	if len(failed) > 0 {
		h.abandon(ctx, failed, firstErr)
	}
	return out
}

// abandon marks the requests' claims failed (best effort: a pending claim also expires) and
// answers them with err. Their seqs become holes.
func (h *SendMessageHandler) abandon(ctx context.Context, reqs []*sendRequest, err error) {
	keys := make([]seq.Key, len(reqs))
	for i, r := range reqs {
		keys[i] = r.key
	}
	if ferr := h.seqs.MarkFailed(ctx, keys); ferr != nil {
		h.log.WarnContext(ctx, "mark sends failed", slog.Int("sends", len(keys)), slog.Any("error", ferr))
	}
	for _, r := range reqs {
		r.fail(err)
	}
}
