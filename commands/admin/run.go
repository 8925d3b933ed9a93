package admin

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/imledger/imledger/domain"
)

// claimBatch claims the commands of items: one insert for those seen for the first time, the
// single-row claim for the others (a repeat, a retry, a takeover). A statement that fails for
// good (PostgreSQL refused the data of a command in it, perhaps of another partition's batch it
// was coalesced with) is not retried as it was: each command is claimed on its own, and one that
// still fails is answered failed. It reports false when the session ended first.
func (c *Consumer) claimBatch(sess, work context.Context, items []*item) bool {
	for attempt := 0; ; attempt++ {
		fresh, err := c.ledger.claimNew(work, items)
		if err == nil {
			for _, it := range items {
				it.fresh = fresh[it.cmd.EventID]
			}
			return true
		}
		if work.Err() != nil {
			return false
		}
		if !errors.Is(err, domain.ErrRetryable) {
			return c.claimEach(sess, work, items)
		}
		c.log.WarnContext(work, "admin: claim a batch of commands", "commands", len(items), "attempt", attempt+1, "err", err)
		if sess.Err() != nil || !c.sleep(sess, c.backoff(attempt)) {
			return false
		}
	}
}

// claimEach claims the commands of items one statement each; a command whose claim fails for
// good is answered failed (permanent_failure) and the others go on.
func (c *Consumer) claimEach(sess, work context.Context, items []*item) bool {
	for _, it := range items {
		for attempt := 0; ; attempt++ {
			fresh, err := c.ledger.claimRows(work, []*item{it})
			if err == nil {
				it.fresh = fresh[it.cmd.EventID]
				break
			}
			if work.Err() != nil {
				return false
			}
			if !errors.Is(err, domain.ErrRetryable) {
				c.failPermanently(work, it, err)
				break
			}
			c.log.WarnContext(work, "admin: claim a command", "event_id", it.cmd.EventID.String(), "attempt", attempt+1, "err", err)
			if sess.Err() != nil || !c.sleep(sess, c.backoff(attempt)) {
				return false
			}
		}
	}
	return true
}

// failPermanently answers it failed (permanent_failure) without a claim or a failure record: the
// ledger itself refused it.
func (c *Consumer) failPermanently(ctx context.Context, it *item, err error) {
	c.log.ErrorContext(ctx, "admin: a command the ledger refuses fails", "event_id", it.cmd.EventID.String(), "err", err)
	r := c.result(it.cmd, domain.AdminFailed, ReasonPermanentFailure, nil, nil)
	it.res, it.unstored, it.done = &r, true, true
}

// acquire takes a slot of Config.Concurrency; false when the session ended first.
func (c *Consumer) acquire(sess context.Context) bool {
	select {
	case c.slots <- struct{}{}:
		return true
	case <-sess.Done():
		return false
	}
}

// runItem takes it to its answer: runs it with retries, dead-letters it past them or at once for
// a permanent failure. It holds a slot only while it claims or runs, not while it waits for a
// command another record or consumer is running. It reports false when the session ended first
// (it is then redelivered).
func (c *Consumer) runItem(sess, work context.Context, it *item) bool {
	if it.done {
		return true
	}
	if sess.Err() != nil {
		return false
	}
	it.started = true
	st, attempts := claimNew, 1
	own := it.fresh
	// A claim made long ago (the batch waited) may have been taken over: look before running.
	needClaim := !it.fresh || time.Since(it.start) > c.cfg.ClaimTimeout/2
	var lastErr error
	reason := ReasonRetriesExhausted
	for retry, waits := 0, 0; ; {
		if !c.acquire(sess) {
			return false
		}
		if needClaim {
			var (
				stored *domain.AdminResult
				err    error
			)
			st, stored, attempts, err = c.ledger.claim(work, it.cmd, it.fp, own)
			if err == nil && st == claimFinished {
				<-c.slots
				it.res, it.stored, it.done = stored, true, true
				return true
			}
			if err == nil && st == claimReused {
				<-c.slots
				r := c.rejected(it.cmd, reject(ReasonEventIDReused, it.cmd.EventID.String(), map[string]any{"field": "event_id"}))
				it.res, it.unstored, it.done = &r, true, true
				return true
			}
			if err != nil && work.Err() == nil && !errors.Is(err, domain.ErrRetryable) {
				<-c.slots
				c.failPermanently(work, it, err)
				return true
			}
			if err != nil || st == claimBusy {
				<-c.slots
				if sess.Err() != nil || !c.sleep(sess, c.backoff(waits)) {
					return false
				}
				waits++
				continue
			}
			own = true
		}
		res, err := c.safeExecute(work, it.cmd, it.decErr, st, attempts)
		<-c.slots
		if err == nil {
			it.res, it.done = &res, true
			return true
		}
		lastErr = err
		if errors.Is(err, context.Canceled) && work.Err() != nil {
			return false
		}
		if permanent(err) {
			reason = ReasonPermanentFailure
			break
		}
		c.log.WarnContext(work, "admin command failed; it is retried", "event_id", it.cmd.EventID.String(),
			"event_type", it.cmd.EventType, "tenant_id", it.cmd.TenantID, "attempt", attempts, "err", err)
		if retry >= c.cfg.Retry.MaxRetries {
			break
		}
		c.metrics.retries.Inc()
		if sess.Err() != nil || !c.sleep(sess, c.backoff(retry)) {
			return false
		}
		retry++
		needClaim = true
	}
	return c.failItem(sess, work, it, lastErr, reason, attempts)
}

// failItem records it in admin_command_failures, dead-letters it and answers it failed with
// reason. A record the store refuses for good does not hold the partition: it is answered failed
// all the same. It reports false when the session ended first.
func (c *Consumer) failItem(sess, work context.Context, it *item, lastErr error, reason string, attempts int) bool {
	for attempt := 0; ; attempt++ {
		if !c.acquire(sess) {
			return false
		}
		res, err := c.deadLetter(work, it, lastErr, reason)
		<-c.slots
		if err == nil {
			it.res, it.done = &res, true
			return true
		}
		if work.Err() == nil && !errors.Is(err, domain.ErrRetryable) {
			c.log.ErrorContext(work, "admin: a failed command cannot be dead-lettered", "event_id", it.cmd.EventID.String(), "err", err)
			r := c.result(it.cmd, domain.AdminFailed, reason, map[string]any{"attempts": attempts}, nil)
			it.res, it.done = &r, true
			return true
		}
		c.log.WarnContext(work, "admin: dead-letter a command", "event_id", it.cmd.EventID.String(), "err", err)
		if sess.Err() != nil || !c.sleep(sess, c.backoff(attempt)) {
			return false
		}
	}
}

// safeExecute is execute with a panic turned into a transient error.
func (c *Consumer) safeExecute(ctx context.Context, cmd domain.AdminCommand, decodeErr error, st claimState, attempts int) (res domain.AdminResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("admin command panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return c.execute(ctx, cmd, decodeErr, st, attempts)
}
