package replay

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/domain"
)

// Progress starts the report of one pass over the event log: label names it ("rebuild t1",
// "verify hot t1") and total is how many events the pass expects to read. The tracker it returns
// is told of every page read and of the end. A nil Progress reports nothing. How progress is
// shown is the caller's choice (cmd/imledger draws a bar); replay draws nothing itself.
type Progress func(label string, total int64) ProgressTracker

// ProgressTracker follows one pass: Add after each page with the events read, Finish once at
// the end. Their errors are ignored: a report that fails never fails the pass. Calls come one at
// a time, so a tracker need not be safe for concurrent use.
type ProgressTracker interface {
	Add(n int) error
	Finish() error
}

// start begins a report, or returns nil when p is nil.
func (p Progress) start(label string, total int64) ProgressTracker {
	if p == nil {
		return nil
	}
	return p(label, total)
}

// count begins the report of a pass over the events of f, labelled label, with the number of them
// events holds as its total; it returns nil when p is nil.
func (p Progress) count(ctx context.Context, events EventReader, f domain.EventFilter, label string) (ProgressTracker, error) {
	total, err := events.Count(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("count events: %w", err)
	}
	return p.start(label, total), nil
}

// finish ends the report bar, when there is one.
func finish(bar ProgressTracker) {
	if bar != nil {
		_ = bar.Finish()
	}
}
