package relay

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/kafka"
)

// term is one period as the active relay.
type term struct {
	r        *Relay
	ctx      context.Context // the caller's: its end asks for a graceful stop
	work     context.Context // store and publish calls; ends when the term must end at once
	notes    <-chan struct{} // store wake-up hints; nil once closed
	number   int64           // the term number in the checkpoint row
	producer *kgo.Client
	sweep    *sweeper
}

// sweeperActor is the cause recorded on the relay's seq-skip markers.
var sweeperActor = domain.Actor{Type: domain.ActorSystem, ID: "relay"}

// end reports whether the term is over and why: the cause when work ended, nil when only ctx
// ended (graceful stop).
func (t *term) end() (bool, error) {
	if t.work.Err() != nil {
		return true, context.Cause(t.work)
	}
	return t.ctx.Err() != nil, nil
}

// pause waits d, or less if wake is set and the store sends a hint, then reports end().
func (t *term) pause(d time.Duration, wake bool) (bool, error) {
	_, stop, err := t.await(d, wake)
	return stop, err
}

// await is pause that also reports whether a store hint ended the wait.
func (t *term) await(d time.Duration, wake bool) (hinted, stop bool, err error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	var notes <-chan struct{}
	if wake {
		notes = t.notes
	}
	select {
	case <-timer.C:
	case _, ok := <-notes:
		if !ok {
			t.notes = nil // the store stopped listening; fall back to polling
		}
		hinted = ok
	case <-t.ctx.Done():
	case <-t.work.Done():
	}
	stop, err = t.end()
	return hinted, stop, err
}

// retry calls f until it succeeds, pausing with backoff after each failure, and gives up when
// the term ends. A failure that fences the term ends it at once. count is incremented per failure.
func (t *term) retry(what string, count func(), f func() error) (bool, error) {
	bo := newBackoff(t.r.cfg.RetryMin, t.r.cfg.RetryMax)
	for {
		err := f()
		if err == nil {
			return false, nil
		}
		if errors.Is(err, eventstore.ErrStaleTerm) || errors.Is(err, errFenced) {
			return true, err
		}
		count()
		t.r.log.Warn(what, "err", err)
		if stop, err := t.pause(bo.next(), false); stop {
			return true, err
		}
	}
}

// begin starts the term: it takes a new term number (fencing earlier terms' checkpoint and
// marker writes), creates missing topics, opens the transactional producer (fencing earlier
// terms' producers) and checks that the broker still holds what it acknowledged. It returns the
// cursor to publish from.
func (t *term) begin() (eventstore.Cursor, bool, error) {
	r := t.r
	var st eventstore.RelayTerm
	if stop, err := t.retry("begin relay term", r.m.storeErrors.Inc, func() (err error) {
		st, err = r.store.BeginRelayTerm(t.work, r.cfg.Name)
		return err
	}); stop {
		return eventstore.Cursor{}, true, err
	}
	t.number = st.Term
	r.term.Store(st.Term)
	r.m.term.Set(float64(st.Term))
	if stop, err := t.retry("create Kafka topics", r.m.publishErrors.Inc, func() error {
		return kafka.EnsureTopics(t.work, r.cfg.Kafka)
	}); stop {
		return eventstore.Cursor{}, true, err
	}
	if stop, err := t.openProducer(); stop {
		return eventstore.Cursor{}, true, err
	}
	if stop, err := t.retry("compare the broker with the checkpoint", r.m.publishErrors.Inc, func() error {
		return t.checkBroker(&st)
	}); stop {
		return eventstore.Cursor{}, true, err
	}
	r.log.Info("relay term started", "term", st.Term, "from_tx_id", st.From().TxID, "from_position", st.From().Position,
		"republishing", st.Republish != nil)
	if !st.HolesSwept {
		go t.sweepHistory()
	}
	return st.From(), false, nil
}

// sweepHistory gives up, once per relay name, every hole the conversations' history has: holes
// left before seq-skip markers existed would otherwise hold every watermark back for good. It runs
// beside the tail, in batches of Config.GapMaxSkips markers, and records when it is done; a term
// that ends first leaves it to the next term.
func (t *term) sweepHistory() {
	r := t.r
	var batch []eventstore.Skip
	var stored int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		got, err := r.store.AppendSkipsFenced(t.work, r.cfg.Name, t.number, batch)
		if err != nil {
			return err
		}
		batch = batch[:0]
		stored += int64(len(got))
		r.skips.Add(int64(len(got)))
		r.m.skips.Add(float64(len(got)))
		return nil
	}
	err := r.store.HistoricHoles(t.work, func(h eventstore.StreamHole) error {
		for seq := h.From; seq <= h.To; seq++ {
			batch = append(batch, eventstore.Skip{Tenant: h.Tenant, Topic: h.Topic, Seq: seq, Reason: domain.SkipGapTimeout, Actor: sweeperActor})
			if len(batch) == r.cfg.GapMaxSkips {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil {
		err = r.store.MarkHolesSwept(t.work, r.cfg.Name, t.number)
	}
	if err != nil {
		if t.work.Err() == nil && !errors.Is(err, eventstore.ErrStaleTerm) {
			r.m.storeErrors.Inc()
			r.log.Warn("give up the holes of the history; the next term tries again", "err", err)
		}
		return
	}
	r.log.Info("gave up the holes of the history", "seqs", stored)
}

// checkBroker compares the cluster with what earlier terms recorded and starts a republish from
// the first event when the broker lost acknowledged records or is another cluster. A relay
// meeting a cluster for the first time only records its id.
func (t *term) checkBroker(st *eventstore.RelayTerm) error {
	r := t.r
	bs, err := inspectBroker(t.work, t.producer, st.Offsets)
	if err != nil {
		return err
	}
	why := lostRecords(*st, bs)
	if why == "" {
		if st.ClusterID == bs.clusterID {
			return nil
		}
		if err := r.store.StartRepublish(t.work, r.cfg.Name, st.Term, bs.clusterID, false); err != nil {
			return err
		}
		st.ClusterID = bs.clusterID
		return nil
	}
	r.log.Error("Kafka lacks records the relay published; republishing every event from the start (consumers dedupe by event_id)",
		"reason", why, "term", st.Term)
	if err := r.store.StartRepublish(t.work, r.cfg.Name, st.Term, bs.clusterID, true); err != nil {
		return err
	}
	r.m.republishes.Inc()
	zero := eventstore.Cursor{}
	st.Republish, st.ClusterID, st.Offsets = &zero, bs.clusterID, nil
	return nil
}

// openProducer opens the term's transactional producer, retrying until it succeeds or the term
// ends.
func (t *term) openProducer() (bool, error) {
	return t.retry("open the transactional producer", t.r.m.publishErrors.Inc, func() (err error) {
		t.producer, err = t.r.newProducer(t.work)
		return err
	})
}

// replaceProducer closes the producer of an abandoned transaction and opens a new one, which
// fences the old one and aborts its transaction.
func (t *term) replaceProducer() (bool, error) {
	t.closeProducer()
	t.producer = nil
	return t.openProducer()
}

// closeProducer closes the term's producer, if it opened one. Closing fails the records it still
// buffers, so a send abandoned on it returns.
func (t *term) closeProducer() {
	if p := t.producer; p != nil {
		go p.Close()
	}
}

// sweepGaps appends markers for the conversation seqs whose deadline has passed. A failure other
// than a fenced term is logged and tried again at the next sweep.
func (t *term) sweepGaps() (bool, error) {
	r := t.r
	skips := t.sweep.due(time.Now(), sweeperActor)
	if len(skips) == 0 {
		r.m.openGapSeqs.Set(float64(t.sweep.missing))
		return false, nil
	}
	stored, err := r.store.AppendSkipsFenced(t.work, r.cfg.Name, t.number, skips)
	if errors.Is(err, eventstore.ErrStaleTerm) {
		return true, err
	}
	if err != nil {
		r.m.storeErrors.Inc()
		r.log.Warn("append seq-skip markers", "err", err, "seqs", len(skips))
		return t.end()
	}
	t.sweep.settled(skips)
	r.skips.Add(int64(len(stored)))
	r.m.skips.Add(float64(len(stored)))
	r.m.openGapSeqs.Set(float64(t.sweep.missing))
	for _, e := range stored {
		r.log.Info("gave up a conversation seq that stayed missing", "tenant_id", e.TenantID.String(),
			"topic", e.StreamID, "seq", e.StreamVersion)
	}
	return false, nil
}

// observe feeds a published batch to the gap sweeper, first asking the store what conversations
// seen for the first time in this term left missing below their first seq.
func (t *term) observe(recs []eventstore.Record) {
	r := t.r
	evs := seqEvents(recs)
	if len(evs) == 0 {
		return
	}
	now := time.Now()
	keys, probes := t.sweep.unknown(evs)
	if len(probes) > 0 {
		missing, err := r.store.MissingVersions(t.work, probes, t.sweep.lookback)
		if err != nil {
			r.m.storeErrors.Inc()
			r.log.Warn("look up earlier holes of conversations", "err", err, "conversations", len(probes))
			missing = make([][]eventstore.VersionRange, len(probes))
		}
		for i, k := range keys {
			t.sweep.learn(k, probes[i].Below, missing[i], now)
		}
	}
	t.sweep.observe(evs, now)
}
