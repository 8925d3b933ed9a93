package relay

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/commands/eventstore"
)

// batch is a page of events read after a cursor and encoded for Kafka. msgs covers recs up to
// the first record that cannot be published, which encErr then describes.
type batch struct {
	recs   []eventstore.Record
	msgs   []outMsg
	encErr error
}

type readResult struct {
	b   batch
	err error
}

// read reads and encodes the batch after cursor.
func (t *term) read(after eventstore.Cursor) (batch, error) {
	t.r.reads.Add(1)
	recs, err := t.r.store.ReadCommitted(t.work, after, t.r.cfg.BatchSize)
	if err != nil {
		return batch{}, err
	}
	msgs, encErr := t.r.encode(recs)
	return batch{recs: recs, msgs: msgs, encErr: encErr}, nil
}

// readAhead reads the batch after cursor on another goroutine, so reading and encoding the next
// batch overlaps with publishing the current one.
func (t *term) readAhead(after eventstore.Cursor) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		b, err := t.read(after)
		ch <- readResult{b, err}
	}()
	return ch
}

// tail relays batches from cursor until the term ends. While a batch is published, the next one
// is already being read; a batch read ahead is dropped unpublished if the term ends. An empty
// read pauses before the next one, a pause a store hint cuts short: MinPoll doubling to MaxPoll
// after a hint or a batch, then MaxPoll while a signalled commit is not visible yet (held behind
// an older transaction), for at most IdlePoll after its signal, and IdlePoll otherwise.
func (t *term) tail(cursor eventstore.Cursor) error {
	r := t.r
	poll := newBackoff(r.cfg.MinPoll, r.cfg.MaxPoll)
	retry := newBackoff(r.cfg.RetryMin, r.cfg.RetryMax)
	chasing := true      // a hint or a batch came since the short series last ran out
	var hintAt time.Time // the last hint no batch has answered yet
	var ahead <-chan readResult
	for {
		if stop, err := t.end(); stop {
			return err
		}
		var b batch
		var err error
		if ahead != nil {
			res := <-ahead // the read ends early if work ends
			ahead, b, err = nil, res.b, res.err
		} else {
			b, err = t.read(cursor)
		}
		if err != nil {
			r.m.storeErrors.Inc()
			r.log.Warn("read committed events", "err", err)
			if stop, err := t.pause(retry.next(), false); stop {
				return err
			}
			continue
		}
		retry.reset()
		if len(b.recs) == 0 {
			r.m.lagSeconds.Set(0)
			if stop, err := t.sweepGaps(); stop {
				return err
			}
			var d time.Duration
			switch {
			case chasing || t.notes == nil:
				chasing = !poll.spent()
				d = poll.next()
			case time.Since(hintAt) < r.cfg.IdlePoll:
				// A commit was signalled and is not visible yet: an older transaction, of any
				// database of the cluster, holds the commit-safe horizon back.
				d = r.cfg.MaxPoll
			case t.sweep.missing > 0:
				d = r.cfg.MaxPoll // seqs are missing: their deadlines are swept at this pace
			default:
				d = r.cfg.IdlePoll
			}
			hinted, stop, err := t.await(d, true)
			if stop {
				return err
			}
			if hinted {
				chasing, hintAt = true, time.Now()
				poll.reset()
			}
			if r.cfg.Linger > 0 {
				// Whatever ended the pause, the commits of the next Linger join one batch.
				if stop, err := t.pause(r.cfg.Linger, false); stop {
					return err
				}
			}
			continue
		}
		if b.encErr == nil {
			ahead = t.readAhead(b.recs[len(b.recs)-1].Cursor)
		}
		next, stop, err := t.relayBatch(b)
		if stop {
			return err
		}
		cursor = next
		poll.reset()
		chasing, hintAt = true, time.Time{}
		if stop, err := t.sweepGaps(); stop {
			return err
		}
	}
}

// relayBatch publishes b in one Kafka transaction, saves the checkpoint with the acknowledged
// offsets and feeds the batch to the gap sweeper, returning the new cursor. Once read, the batch
// is finished even if ctx ends meanwhile, unless a publish or save fails then, or work ends;
// stop reports that the term is over. A record that cannot be published ends the batch before it
// and the term with errBlocked.
func (t *term) relayBatch(b batch) (next eventstore.Cursor, stop bool, err error) {
	r := t.r
	start := time.Now()
	recs, msgs, encErr := b.recs, b.msgs, b.encErr
	r.m.blocked.Set(0)
	if encErr != nil {
		r.m.blocked.Set(1)
		if len(msgs) == 0 {
			return eventstore.Cursor{}, true, errors.Join(errBlocked, encErr)
		}
	}
	done := recs[:len(msgs)]
	offsets, stop, err := t.publish(msgs)
	if stop {
		return eventstore.Cursor{}, true, err
	}
	last := done[len(done)-1]
	if stop, err := t.saveCheckpoint(last.Cursor, offsets); stop {
		return eventstore.Cursor{}, true, err
	}
	r.countBatch(msgs, last, time.Since(start))
	t.observe(done)
	if encErr != nil {
		return eventstore.Cursor{}, true, errors.Join(errBlocked, encErr)
	}
	return last.Cursor, false, nil
}

// publish sends msgs as one Kafka transaction until it commits, retrying with backoff, and
// returns the acknowledged offsets. An attempt that takes longer than Config.PublishTimeout is
// abandoned and the producer replaced (the new one fences and aborts the old transaction). It
// gives up when work ends, when the producer was fenced (errFenced), or when ctx has ended and
// an attempt fails: the checkpoint stays, so nothing is lost.
func (t *term) publish(msgs []outMsg) ([]eventstore.PartitionOffset, bool, error) {
	r := t.r
	bo := newBackoff(r.cfg.RetryMin, r.cfg.RetryMax)
	for {
		recs := make([]*kgo.Record, len(msgs))
		for i := range msgs {
			recs[i] = msgs[i].record()
		}
		err := t.send(recs)
		if err == nil {
			return ackedOffsets(recs), false, nil
		}
		r.m.publishErrors.Inc()
		if errors.Is(err, errFenced) {
			return nil, true, err
		}
		if stop, err := t.end(); stop && t.work.Err() != nil {
			return nil, true, err
		}
		r.log.Warn("publish batch to Kafka; retrying without moving the checkpoint", "events", len(msgs), "err", err)
		if errors.Is(err, errPublishTimeout) {
			if stop, err := t.replaceProducer(); stop {
				return nil, true, err
			}
		}
		if t.ctx.Err() != nil {
			stop, err := t.end()
			return nil, stop, err
		}
		if stop, err := t.pause(bo.next(), false); stop {
			return nil, true, err
		}
	}
}

// errPublishTimeout ends a publish attempt that took longer than Config.PublishTimeout.
var errPublishTimeout = errors.New("relay: publish attempt timed out")

// send publishes recs in one transaction of the term's producer, abandoned when work ends or
// after Config.PublishTimeout: a send to an unreachable cluster can retry for long, and a lost
// lock or the stop timeout must not wait for it. An abandoned transaction is never committed:
// the producer that replaces it aborts it.
func (t *term) send(recs []*kgo.Record) error {
	done := make(chan error, 1)
	p := t.producer
	go func() { done <- sendTxn(t.work, p, recs) }()
	timer := time.NewTimer(t.r.cfg.PublishTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return errPublishTimeout
	case <-t.work.Done():
		return context.Cause(t.work)
	}
}

func (t *term) saveCheckpoint(c eventstore.Cursor, offsets []eventstore.PartitionOffset) (bool, error) {
	r := t.r
	bo := newBackoff(r.cfg.RetryMin, r.cfg.RetryMax)
	for {
		err := r.store.SaveRelayProgress(t.work, r.cfg.Name, t.number, c, offsets)
		if err == nil {
			return false, nil
		}
		if errors.Is(err, eventstore.ErrStaleTerm) {
			return true, err
		}
		r.m.storeErrors.Inc()
		r.log.Warn("save relay checkpoint", "err", err, "tx_id", c.TxID, "position", c.Position)
		if t.ctx.Err() != nil {
			return t.end()
		}
		if stop, err := t.pause(bo.next(), false); stop {
			return true, err
		}
	}
}

func (r *Relay) countBatch(msgs []outMsg, last eventstore.Record, took time.Duration) {
	perTopic := map[string]int{}
	for _, m := range msgs {
		perTopic[m.topic]++
	}
	for topic, n := range perTopic {
		r.m.events.WithLabelValues(topic).Add(float64(n))
	}
	r.m.batches.Inc()
	r.m.lastPosition.Set(float64(last.Cursor.Position))
	r.m.lagSeconds.Set(max(0, time.Since(last.Envelope.OccurredAt).Seconds()))
	r.m.batchSeconds.Observe(took.Seconds())
	r.events.Add(int64(len(msgs)))
	r.batches.Add(1)
	r.txID.Store(last.Cursor.TxID)
	r.pos.Store(last.Cursor.Position)
}
