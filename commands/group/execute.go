package group

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// decision is one attempt's outcome: the events to append and what the result reports.
type decision struct {
	events []domain.PendingEvent
	// guard holds the versions of the streams whose change must surface rather than be
	// retried (the target's and the actor's memberships for moderation commands). nil: a lost
	// race is always retried. It is set even when the attempt ends in a refusal, so a refusal
	// caused by a concurrent change is reported as the lost race it is.
	guard []int64
	// reads are the streams the decision was made on, at the versions it saw: a stream among
	// them that the events do not write is checked at the append, so a decision taken on an
	// actor's role that changed meanwhile is not committed (it is a lost race).
	reads []StreamVersion
	group domain.GroupID
	topic domain.Topic
	bizID string
}

// spec describes how a command runs.
type spec struct {
	op    string
	actor domain.Principal
	meta  Meta
	// lock is the stream whose in-process stripe serialises retries of the command, so a
	// command that lost to a burst of joins on this node does not lose again; "" for none.
	lock string
	// serial takes the lock from the first attempt: joins and leaves, which all append to the
	// group stream and would otherwise conflict with each other on every burst.
	serial bool
}

// decideFunc loads the aggregates and asks the domain for a decision.
type decideFunc func(ctx context.Context) (decision, error)

// execute runs a command: decide, append with the expected versions, and on a lost race reload
// and decide again, up to Config.MaxAttempts times. A command with a guard does not retry when
// the guarded streams moved: it fails with a *ConflictError. After the commit the appended
// events are folded into the loader, the Invalidator hears the written streams and the Notifier
// the changes, with a context that ignores ctx's cancellation (the commit already happened).
func (c *core) execute(ctx context.Context, s spec, decide decideFunc) (Result, error) {
	if err := checkActor(s.actor); err != nil {
		return Result{}, err
	}
	var (
		unlock    func()
		prevGuard []int64
		lost      error
	)
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()
	for attempt := 1; ; attempt++ {
		if s.lock != "" && unlock == nil && (s.serial || attempt > 1) {
			u, err := c.locks.lock(ctx, lockKey(s.actor.Tenant, s.lock))
			if err != nil {
				return Result{}, fmt.Errorf("%s: %w", s.op, err)
			}
			unlock = u
		}
		d, err := decide(ctx)
		if lost != nil && prevGuard != nil && d.guard != nil && !slices.Equal(prevGuard, d.guard) {
			return Result{}, &ConflictError{Op: s.op, Err: lost}
		}
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w", s.op, err)
		}
		if len(d.events) == 0 {
			return Result{Group: d.group, Topic: d.topic, Unchanged: true}, nil
		}
		stored, err := c.commit(ctx, s, d)
		if err == nil {
			return c.committed(ctx, s.actor.Tenant, d, stored), nil
		}
		if !errors.Is(err, domain.ErrConcurrency) || attempt >= c.cfg.MaxAttempts {
			return Result{}, fmt.Errorf("%s: %w", s.op, err)
		}
		prevGuard, lost = d.guard, err
		if err := c.pause(ctx, attempt); err != nil {
			return Result{}, fmt.Errorf("%s: %w", s.op, err)
		}
	}
}

// pause sleeps a random time below attempt × RetryBackoff, so racing nodes spread out.
func (c *core) pause(ctx context.Context, attempt int) error {
	if c.cfg.RetryBackoff <= 0 {
		return nil
	}
	d := time.Duration(rand.Int64N(int64(c.cfg.RetryBackoff) * int64(attempt)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// commit turns the decision into envelopes and appends them.
func (c *core) commit(ctx context.Context, s spec, d decision) ([]domain.Envelope, error) {
	events, err := domain.SealPersonal(ctx, c.sealer, s.actor.Tenant, d.events)
	if err != nil {
		return nil, err
	}
	envs, err := envelopes(s.actor, s.meta, d.bizID, events)
	if err != nil {
		return nil, err
	}
	return c.appendAll(ctx, s.actor.Tenant, envs, d.reads...)
}

// envelopes turns one command's decided events into envelopes carrying its metadata.
func envelopes(p domain.Principal, meta Meta, bizID string, events []domain.PendingEvent) ([]domain.Envelope, error) {
	actor := meta.Actor
	if actor == (domain.Actor{}) {
		actor = domain.Actor{Type: domain.ActorUser, ID: p.User.String()}
	}
	envs, err := domain.NewEnvelopes(p.Tenant, actor, events)
	if err != nil {
		return nil, err
	}
	for i := range envs {
		e := &envs[i]
		e.TraceID, e.CorrelationID, e.CausationID, e.BizID = meta.TraceID, meta.CorrelationID, meta.CausationID, bizID
	}
	return envs, nil
}

// appendAll appends envelopes numbered consecutively per stream, one part per stream, the parts
// sorted by stream id so two transactions touching the same streams lock them in one order.
// Each stream of reads that no envelope writes becomes a part without events, which the store
// checks to be still at its version. It returns the stored envelopes grouped by stream in that
// order.
func (c *core) appendAll(ctx context.Context, tenant domain.TenantID, envs []domain.Envelope, reads ...StreamVersion) ([]domain.Envelope, error) {
	index := make(map[string]int, 3)
	var parts []eventstore.StreamAppend
	for _, e := range envs {
		i, ok := index[e.StreamID]
		if !ok {
			i = len(parts)
			index[e.StreamID] = i
			parts = append(parts, eventstore.StreamAppend{StreamID: e.StreamID, ExpectedVersion: e.StreamVersion - 1})
		}
		parts[i].Events = append(parts[i].Events, e)
	}
	for _, r := range reads {
		if _, ok := index[r.StreamID]; !ok {
			index[r.StreamID] = len(parts)
			parts = append(parts, eventstore.StreamAppend{StreamID: r.StreamID, ExpectedVersion: r.Version})
		}
	}
	slices.SortFunc(parts, func(a, b eventstore.StreamAppend) int { return strings.Compare(a.StreamID, b.StreamID) })
	stored, err := c.store.AppendStreams(ctx, tenant, parts)
	if err != nil {
		return nil, retryable("append events", err)
	}
	return stored, nil
}

// committed does the after-commit work of one decision and builds its result.
func (c *core) committed(ctx context.Context, tenant domain.TenantID, d decision, stored []domain.Envelope) Result {
	c.loader.observe(tenant, stored)
	res := resultOf(d, stored)
	c.announce(ctx, tenant, res)
	return res
}

// resultOf builds the result of a committed decision from its stored envelopes.
func resultOf(d decision, envs []domain.Envelope) Result {
	return Result{Group: d.group, Topic: d.topic, Versions: versionsOf(envs), Changes: changesOf(d.events)}
}

// announce tells the Invalidator, the Notifier and the ChangeListener about a committed result, with a context that
// ignores ctx's cancellation: the commit already happened.
func (c *core) announce(ctx context.Context, tenant domain.TenantID, res Result) {
	ctx = context.WithoutCancel(ctx)
	streams := make([]string, len(res.Versions))
	for i, v := range res.Versions {
		streams[i] = v.StreamID
	}
	c.inval.Invalidate(ctx, tenant, streams)
	notify(ctx, c.notifier, tenant, res.Changes)
	if c.changes != nil && len(res.Changes) > 0 {
		c.changes.ChangesCommitted(ctx, tenant, res.Changes)
	}
}

// groupDecision is the decision of a group command: events plus the group, its topic and biz id.
func groupDecision(g domain.GroupID, events []domain.PendingEvent) decision {
	t, _ := g.Topic()
	return decision{events: events, group: g, topic: t, bizID: g.String()}
}
