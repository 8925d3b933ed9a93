package group

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/imledger/imledger/domain"
)

// joinBatcher group-commits the joins into one group that arrive on this process while the
// previous batch of that group commits. The first caller to find no batch running leads: it takes
// up to Config.JoinBatch queued joins, decides them one after the other against the group state
// as each earlier join of the batch leaves it (member count, a user asking twice), appends all of
// their events in one transaction and answers each caller. If joins queued up meanwhile, a new
// goroutine leads the next batch, so no caller waits for batches after its own.
type joinBatcher struct {
	c      *core
	mu     sync.Mutex
	queues map[string]*joinQueue // by tenant and group stream
}

// joinQueue holds the joins of one group waiting for a batch.
type joinQueue struct {
	tenant  domain.TenantID
	group   domain.GroupID
	reqs    []*joinRequest
	leading bool
}

// joinRequest is one JoinGroup and where its answer goes.
type joinRequest struct {
	cmd  JoinGroup
	done chan joinOutcome // buffered: the leader never blocks on it
}

type joinOutcome struct {
	res Result
	err error
}

func newJoinBatcher(c *core) *joinBatcher {
	return &joinBatcher{c: c, queues: make(map[string]*joinQueue)}
}

// join queues cmd and waits for its batch. When ctx ends first the join may still commit.
func (b *joinBatcher) join(ctx context.Context, cmd JoinGroup) (Result, error) {
	key := lockKey(cmd.Actor.Tenant, domain.GroupStreamID(cmd.Group))
	r := &joinRequest{cmd: cmd, done: make(chan joinOutcome, 1)}
	b.mu.Lock()
	q := b.queues[key]
	if q == nil {
		q = &joinQueue{tenant: cmd.Actor.Tenant, group: cmd.Group}
		b.queues[key] = q
	}
	q.reqs = append(q.reqs, r)
	lead := !q.leading
	q.leading = true
	b.mu.Unlock()
	if lead {
		b.lead(context.WithoutCancel(ctx), key, q)
	}
	select {
	case o := <-r.done:
		return o.res, o.err
	case <-ctx.Done():
		return Result{}, fmt.Errorf("join group: %w", ctx.Err())
	}
}

// lead commits one batch of q, then hands the lead to a new goroutine if joins are waiting.
func (b *joinBatcher) lead(ctx context.Context, key string, q *joinQueue) {
	b.mu.Lock()
	n := min(len(q.reqs), b.c.cfg.JoinBatch)
	batch := q.reqs[:n:n]
	q.reqs = q.reqs[n:]
	b.mu.Unlock()

	b.run(ctx, key, q, batch)

	b.mu.Lock()
	more := len(q.reqs) > 0
	if !more {
		q.leading = false
		delete(b.queues, key)
	}
	b.mu.Unlock()
	if more {
		go b.lead(ctx, key, q)
	}
}

// run decides and commits one batch, deciding it again after a lost race, and answers every
// request of it.
func (b *joinBatcher) run(ctx context.Context, key string, q *joinQueue, batch []*joinRequest) {
	ctx, cancel := context.WithTimeout(ctx, b.c.cfg.BatchTimeout)
	defer cancel()
	fail := func(err error) {
		for _, r := range batch {
			r.done <- joinOutcome{err: fmt.Errorf("join group: %w", err)}
		}
	}
	unlock, err := b.c.locks.lock(ctx, key)
	if err != nil {
		fail(domain.Retryable("wait for the group", err))
		return
	}
	defer unlock()
	for attempt := 1; ; attempt++ {
		outs, err := b.attempt(ctx, q, batch)
		if err == nil {
			for i, r := range batch {
				r.done <- outs[i]
			}
			return
		}
		if !errors.Is(err, domain.ErrConcurrency) || attempt >= b.c.cfg.MaxAttempts {
			fail(err)
			return
		}
		if err := b.c.pause(ctx, attempt); err != nil {
			fail(domain.Retryable("join group", err))
			return
		}
	}
}

// attempt decides every join of the batch against freshly loaded states and appends the
// accepted ones in one transaction. Refusals are per request; an error is the batch's.
func (b *joinBatcher) attempt(ctx context.Context, q *joinQueue, batch []*joinRequest) ([]joinOutcome, error) {
	c := b.c
	g, err := c.group(ctx, q.tenant, q.group)
	if err != nil {
		return nil, err
	}
	ms, err := b.memberships(ctx, q, batch)
	if err != nil {
		return nil, err
	}
	outs := make([]joinOutcome, len(batch))
	decided := make([]decision, len(batch))
	var all []domain.Envelope
	for i, r := range batch {
		m := ms[r.cmd.Actor.User]
		events, err := g.Join(r.cmd.Actor, m, c.cfg.MaxMembers, c.now())
		if err != nil {
			outs[i].err = fmt.Errorf("join group: %w", err)
			continue
		}
		if len(events) == 0 {
			outs[i].res = Result{Group: q.group, Unchanged: true}
			continue
		}
		d := groupDecision(q.group, events)
		envs, err := envelopes(r.cmd.Actor, r.cmd.Meta, d.bizID, events)
		if err != nil {
			return nil, err
		}
		for _, e := range envs {
			if e.StreamID == g.StreamID() {
				err = g.Apply(e)
			} else {
				err = m.Apply(e)
			}
			if err != nil {
				return nil, fmt.Errorf("fold the batch: %w", err)
			}
		}
		ms[r.cmd.Actor.User] = m
		decided[i] = d
		outs[i].res = resultOf(d, envs)
		all = append(all, envs...)
	}
	if len(all) == 0 {
		return outs, nil
	}
	stored, err := c.appendAll(ctx, q.tenant, all)
	if err != nil {
		return nil, err
	}
	c.loader.observe(q.tenant, stored)
	for i := range batch {
		if decided[i].events != nil {
			c.announce(ctx, q.tenant, outs[i].res)
		}
	}
	return outs, nil
}

// memberships loads the memberships of the batch's users, a few reads at a time.
func (b *joinBatcher) memberships(ctx context.Context, q *joinQueue, batch []*joinRequest) (map[domain.UserID]domain.MembershipState, error) {
	const parallel = 4
	seen := make(map[domain.UserID]bool, len(batch))
	var users []domain.UserID
	for _, r := range batch {
		if u := r.cmd.Actor.User; !seen[u] {
			seen[u] = true
			users = append(users, u)
		}
	}
	states := make([]domain.MembershipState, len(users))
	errs := make([]error, len(users))
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i, u := range users {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			states[i], errs[i] = b.c.member(ctx, q.tenant, q.group, u)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	ms := make(map[domain.UserID]domain.MembershipState, len(users))
	for i, u := range users {
		ms[u] = states[i]
	}
	return ms, nil
}
