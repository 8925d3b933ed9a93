package projections

import (
	"context"
	"sync"
	"time"
)

// openRecheck is how often a consumer group found to hold open dead letters is looked at again
// as a whole, to learn when the last of them was resolved.
var openRecheck = 5 * time.Second

// openWatch knows when a consumer group holds no open dead letter at all, so that a batch of it
// needs no lookup of its conversations (one PostgreSQL round trip per batch, at light load one
// per event). It trusts a group-wide lookup that found none only until something could have
// opened one that this process did not see:
//
//   - this process records a dead letter of the group (the sink says so before it records it,
//     and again once it has: a lookup that ran while the row was written may have missed it);
//   - the group's partitions move (a new consumer group session): another member may have
//     dead-lettered an event of a partition this process now consumes, before it got it.
//
// Only the member that owns a partition dead-letters its events, so nothing else opens one for a
// conversation this process is applying. Resolutions elsewhere (a replay, a skip) only close dead
// letters: the group is then looked at again within openRecheck.
type openWatch struct {
	mu      sync.Mutex
	gen     uint64    // bumped by every event above
	empty   bool      // a lookup that began at gen found no open dead letter
	checked time.Time // when the group was last looked at as a whole
}

// invalidate forgets what the watch knew.
func (w *openWatch) invalidate() {
	w.mu.Lock()
	w.gen++
	w.empty = false
	w.checked = time.Time{}
	w.mu.Unlock()
}

// none reports whether group holds no open dead letter: from what the watch knows, or from a
// group-wide lookup when the watch knows nothing or last found some openRecheck ago. false
// (and an error) when the lookup failed: the caller then looks its conversations up as before.
func (w *openWatch) none(ctx context.Context, parking parkingStore, group string) (bool, error) {
	w.mu.Lock()
	if w.empty {
		w.mu.Unlock()
		return true, nil
	}
	if !w.checked.IsZero() && time.Since(w.checked) < openRecheck {
		w.mu.Unlock()
		return false, nil
	}
	gen := w.gen
	w.checked = time.Now()
	w.mu.Unlock()
	any, err := parking.anyOpen(ctx, group)
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gen != gen {
		return false, nil
	}
	w.empty = !any
	return w.empty, nil
}
