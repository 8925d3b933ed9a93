// Package coalesce runs the calls of a batched operation that arrive while one is in flight as
// one operation: the group commit of statements that would otherwise each be a transaction.
package coalesce

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// Group runs calls of type T (pointers to structs that carry their own inputs and outputs) in
// rounds. A call that finds the Group idle runs at once, alone, so an idle caller waits no longer
// than without it; the calls that arrive while a round runs queue and go together in the next.
// The caller that found the Group idle returns after its own round; the rounds queued behind it
// run on a goroutine. A round runs under a context detached from its callers' cancellation (one
// caller leaving must not fail the others) with the latest of their deadlines (none when one of
// them has none), and every caller waits for its round. The zero Group is not usable: set Run.
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
	ctx  context.Context
	call T
	err  error
	done chan struct{}
}

// Do runs call in a round and returns when Run has set its outputs. It returns an error only
// when Run panicked in call's round (the panic is recovered: every call of the round gets the
// error, with the stack); call's outputs are then not set.
func (g *Group[T]) Do(ctx context.Context, call T) error {
	w := &waiting[T]{ctx: ctx, call: call, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, w)
	if g.busy {
		g.mu.Unlock()
		<-w.done
		return w.err
	}
	g.busy = true
	g.mu.Unlock()
	// The queue was empty, so this call is first in it and in the first round.
	if g.runNext() {
		go func() {
			for g.runNext() {
			}
		}()
	}
	return w.err
}

// runNext runs the next round and reports whether calls are left; with none left the Group is
// idle again.
func (g *Group[T]) runNext() bool {
	g.mu.Lock()
	round, rest := g.take()
	g.queue = rest
	g.mu.Unlock()
	g.run(round)
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

// run calls Run for round under the round's context and turns a panic into every call's error.
func (g *Group[T]) run(round []*waiting[T]) {
	ctx, cancel := roundContext(round)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("coalesce: a round of %d calls panicked: %v\n%s", len(round), p, debug.Stack())
			for _, w := range round {
				w.err = err
			}
		}
	}()
	calls := make([]T, len(round))
	for i, w := range round {
		calls[i] = w.call
	}
	g.Run(ctx, calls)
}

// roundContext is the context of a round: the values of its first call's context, none of their
// cancellations, and the latest of their deadlines (none when a call has none).
func roundContext[T any](round []*waiting[T]) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, w := range round {
		d, ok := w.ctx.Deadline()
		if !ok {
			return context.WithoutCancel(round[0].ctx), func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(round[0].ctx), latest)
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
