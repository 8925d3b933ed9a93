package relay

import (
	"context"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/transport/kafka"
)

// term is one period as the active relay.
type term struct {
	r     *Relay
	ctx   context.Context // the caller's: its end asks for a graceful stop
	work  context.Context // store and publish calls; ends when the term must end at once
	notes <-chan struct{} // store wake-up hints; nil once closed
}

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
	case <-t.ctx.Done():
	case <-t.work.Done():
	}
	return t.end()
}

// ensureTopics creates missing topics when Config.Kafka names brokers, retrying until it
// succeeds or the term ends.
func (t *term) ensureTopics() (bool, error) {
	if len(t.r.cfg.Kafka.Brokers) == 0 {
		return false, nil
	}
	bo := newBackoff(t.r.cfg.RetryMin, t.r.cfg.RetryMax)
	for {
		err := kafka.EnsureTopics(t.work, t.r.cfg.Kafka)
		if err == nil {
			return false, nil
		}
		t.r.m.publishErrors.Inc()
		t.r.log.Warn("create Kafka topics", "err", err)
		if stop, err := t.pause(bo.next(), false); stop {
			return true, err
		}
	}
}

func (t *term) loadCheckpoint() (eventstore.Cursor, bool, error) {
	bo := newBackoff(t.r.cfg.RetryMin, t.r.cfg.RetryMax)
	for {
		c, err := t.r.store.LoadCheckpoint(t.work, t.r.cfg.Name)
		if err == nil {
			return c, false, nil
		}
		t.r.m.storeErrors.Inc()
		t.r.log.Warn("load relay checkpoint", "err", err)
		if stop, err := t.pause(bo.next(), false); stop {
			return eventstore.Cursor{}, true, err
		}
	}
}
