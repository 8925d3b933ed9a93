// Package coalesce runs the calls of a batched operation that arrive while one is in flight as
// one operation: the group commit of statements that would otherwise each be a transaction.
package coalesce

import (
	"context"
	"sync"
)

// Group runs calls of type T (pointers to structs that carry their own inputs and outputs) in
// rounds. A call that finds the Group idle runs at once, alone, so an idle caller waits no longer
// than without it; the calls that arrive while a round runs queue and go together in the next.
// The caller that found the Group idle returns after its own round; the rounds queued behind it
// run on a goroutine with its context (detached from its cancellation, keeping its deadline).
// The zero Group is not usable: set Run.
type Group[T any] struct {
	// Run runs one round; it sets every call's outputs before it returns. Required.
	Run func(ctx context.Context, round []T)
	// Admit, when set, starts a round: the function it returns is asked, oldest first, whether
	// each waiting call after the first joins it; those it refuses wait for a later round.
	// Default: every waiting call joins.
	Admit func() func(call T) bool

	mu    sync.Mutex
	queue []*waiting[T]
	busy  bool
}

type waiting[T any] struct {
	call T
	done chan struct{}
}

// Do runs call in a round and returns when Run has set its outputs.
func (g *Group[T]) Do(ctx context.Context, call T) {
	w := &waiting[T]{call: call, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, w)
	if g.busy {
		g.mu.Unlock()
		<-w.done
		return
	}
	g.busy = true
	g.mu.Unlock()
	// The queue was empty, so this call is first in it and in the first round.
	detached := context.WithoutCancel(ctx)
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		detached, cancel = context.WithDeadline(detached, d)
		defer cancel()
	}
	if g.runNext(detached) {
		rest := context.WithoutCancel(ctx)
		go func() {
			for g.runNext(rest) {
			}
		}()
	}
}

// runNext runs the next round and reports whether calls are left; with none left the Group is
// idle again.
func (g *Group[T]) runNext(ctx context.Context) bool {
	g.mu.Lock()
	round, rest := g.take()
	g.queue = rest
	g.mu.Unlock()
	calls := make([]T, len(round))
	for i, w := range round {
		calls[i] = w.call
	}
	g.Run(ctx, calls)
	for _, w := range round {
		close(w.done)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		g.busy = false
		return false
	}
	return true
}

// take splits the queue into the next round and the calls left for later.
func (g *Group[T]) take() (round, rest []*waiting[T]) {
	if g.Admit == nil {
		return g.queue, nil
	}
	admit := g.Admit()
	for i, w := range g.queue {
		if admit(w.call) || i == 0 {
			round = append(round, w)
		} else {
			rest = append(rest, w)
		}
	}
	return round, rest
}

// Queued reports how many calls wait for a round (those of the round running are not counted).
func (g *Group[T]) Queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}
