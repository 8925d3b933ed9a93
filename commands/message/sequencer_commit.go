package message

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/domain"
)

// ReasonRejectedByStore is the reason (field "message") of a send the event store refused for
// its data although it passed every check: the same send fails again, so it is answered 400.
const ReasonRejectedByStore = "rejected_by_store"

// commit appends the allocated requests, giving a new seq to those whose seq was already taken,
// and returns the requests that are committed (appended now or found as duplicates) with their
// results set. Every other request is answered with an error and its claim marked failed.
func (h *SendMessageHandler) commit(ctx context.Context, reqs []*sendRequest) []*sendRequest {
	var committed []*sendRequest
	for attempt := 1; len(reqs) > 0; attempt++ {
		events, kept := h.envelopes(ctx, reqs)
		reqs = kept
		if len(reqs) == 0 {
			break
		}
		var taken, failed []*sendRequest
		for i, o := range h.appendIsolating(ctx, events) {
			r := reqs[i]
			switch {
			case o.err != nil:
				r.err = o.err
				failed = append(failed, r)
			case o.res.Status == eventstore.Appended:
				r.result = SendResult{Seq: r.seq, MessageID: r.id.String(), SentAt: r.sentAt}
				r.appended = true
				committed = append(committed, r)
			case o.res.Status == eventstore.Duplicate:
				r.result = storedResult(o.res.Existing)
				committed = append(committed, r)
			default:
				r.seq = 0 // another event holds it: not this send's hole
				taken = append(taken, r)
			}
		}
		h.drop(ctx, failed)
		if len(taken) > 0 && attempt == h.cfg.MaxAppendAttempts {
			h.abandon(ctx, taken, domain.Retryable("append message", domain.ErrConcurrency))
			break
		}
		reqs = h.reallocate(ctx, taken)
	}
	return committed
}

// appendOutcome is what became of one event of an append.
type appendOutcome struct {
	res eventstore.AppendResult
	err error // set when the event was not stored
}

// appendIsolating appends events in one transaction. When the store refuses the batch for
// anything but a transient failure, it appends the two halves in turn, and so on, until the
// events at fault are alone: one bad message fails only its own send, and the other sends of its
// batch commit. Halves commit in order, so seq order stays commit order. A transient failure
// fails the events not yet stored with a retryable error.
func (h *SendMessageHandler) appendIsolating(ctx context.Context, events []domain.Envelope) []appendOutcome {
	out := make([]appendOutcome, len(events))
	h.appendRange(ctx, events, out)
	return out
}

// appendRange appends events and fills out; it reports whether the failure it met, if any, was
// transient (then the caller stops splitting).
func (h *SendMessageHandler) appendRange(ctx context.Context, events []domain.Envelope, out []appendOutcome) (transient bool) {
	results, err := h.store.AppendBatch(ctx, events)
	if err == nil && len(results) != len(events) {
		failAll(out, errors.New("append message: the event store answered a different number of results"))
		return false
	}
	if err == nil {
		for i, res := range results {
			out[i].res = res
		}
		return false
	}
	if errors.Is(err, domain.ErrRetryable) || ctx.Err() != nil {
		failAll(out, retryable("append message", err))
		return true
	}
	if len(events) == 1 {
		out[0].err = h.refusal(ctx, events[0], err)
		return false
	}
	mid := len(events) / 2
	if h.appendRange(ctx, events[:mid], out[:mid]) {
		failAll(out[mid:], out[0].err)
		return true
	}
	return h.appendRange(ctx, events[mid:], out[mid:])
}

func failAll(out []appendOutcome, err error) {
	for i := range out {
		out[i].err = err
	}
}

// refusal is the answer to a send whose event the store refused on its own: 400 when the store
// refused its data (the same send fails again), a retryable error otherwise (the store's state
// may be at fault, not the send).
func (h *SendMessageHandler) refusal(ctx context.Context, e domain.Envelope, err error) error {
	if !eventstore.Refused(err) {
		return retryable("append message", err)
	}
	h.log.WarnContext(ctx, "event store refused a message", slog.String("tenant_id", e.TenantID.String()),
		slog.String("topic", e.StreamID), slog.String("event_id", e.EventID.String()), slog.Any("error", err))
	return &domain.ValidationError{Field: "message", Reason: ReasonRejectedByStore,
		Detail: "the event store refused this message's data"}
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
	content := c.Content.Raw()
	if c.sealed != nil {
		content = c.sealed
	}
	p := domain.MessageSent{
		MessageID: r.id.String(), Topic: c.Topic.String(), Seq: r.seq, From: c.From,
		ClientMsgID: c.ClientMsgID.String(), MsgType: c.MsgType, Content: content,
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
		rr[i] = seq.Realloc{Key: r.key, Nonce: r.nonce, Floor: floors[r.topic()]}
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

// abandon fails every request with err; see drop.
func (h *SendMessageHandler) abandon(ctx context.Context, reqs []*sendRequest, err error) {
	for _, r := range reqs {
		r.err = err
	}
	h.drop(ctx, reqs)
}

// drop marks the requests' claims failed (best effort: a pending claim also expires, and a retry
// on this node takes it over at once) and answers each with its error. Their seqs become holes.
func (h *SendMessageHandler) drop(ctx context.Context, reqs []*sendRequest) {
	if len(reqs) == 0 {
		return
	}
	asks := make([]seq.Request, len(reqs))
	for i, r := range reqs {
		asks[i] = seq.Request{Key: r.key, Nonce: r.nonce}
	}
	if ferr := h.seqs.MarkFailed(ctx, asks); ferr != nil {
		h.log.WarnContext(ctx, "mark sends failed", slog.Int("sends", len(asks)), slog.Any("error", ferr))
	}
	for _, r := range reqs {
		h.fail(r, r.err)
	}
}

// notifyCommitted hands the messages the batch appended to the commit listener.
func (h *SendMessageHandler) notifyCommitted(ctx context.Context, reqs []*sendRequest) {
	if h.listener == nil {
		return
	}
	msgs := make([]CommittedMessage, 0, len(reqs))
	for _, r := range reqs {
		if !r.appended {
			continue
		}
		c := r.cmd
		msgs = append(msgs, CommittedMessage{Tenant: c.Tenant, Topic: c.Topic, From: c.From, Seq: r.seq,
			MessageID: r.result.MessageID, MsgType: c.MsgType, Head: c.Head, Content: c.Content, SentAt: r.sentAt, Route: r.route})
	}
	if len(msgs) > 0 {
		safely(ctx, h.log, "commit listener", func() { h.listener.MessagesCommitted(ctx, msgs) })
	}
}

// recordHoles reports the seqs of the batch's requests that will never hold their message: the
// seq of a send that failed or was answered by an earlier identical send, and the seq of an
// abandoned attempt a send took over unless that attempt's message is the one found.
func (h *SendMessageHandler) recordHoles(ctx context.Context, reqs []*sendRequest) {
	if h.holes == nil {
		return
	}
	var holes []AbandonedSeq
	add := func(r *sendRequest, s int64) {
		holes = append(holes, AbandonedSeq{Tenant: r.cmd.Tenant, Topic: r.cmd.Topic, Seq: s})
	}
	for _, r := range reqs {
		if !r.appended && r.seq > 0 {
			add(r, r.seq)
		}
		if r.replaced > 0 && r.replaced != r.seq && (r.err != nil || r.result.Seq != r.replaced) {
			add(r, r.replaced)
		}
	}
	if len(holes) > 0 {
		safely(ctx, h.log, "hole recorder", func() { h.holes.SeqsAbandoned(ctx, holes) })
	}
}
