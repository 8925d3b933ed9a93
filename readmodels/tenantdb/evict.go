package tenantdb

import (
	"database/sql"
	"time"
)

// pool is one tenant's connection pool and what eviction knows of its use.
type pool struct {
	db       *sql.DB
	lastUsed time.Time   // the last DB call, or the last sweep that saw the pool in use
	seen     sql.DBStats // the pool's statistics at the last sweep
	retired  time.Time   // when it was evicted, or last seen in use since
}

// busy reports whether the pool was used since the sweep that recorded seen: a connection is in
// use or open (connections close ConnMaxIdleTime after their last use), or one was waited for,
// opened and closed in between.
func (p *pool) busy(st sql.DBStats) bool {
	return st.InUse > 0 || st.OpenConnections > 0 || st.WaitCount != p.seen.WaitCount ||
		st.MaxIdleClosed != p.seen.MaxIdleClosed || st.MaxIdleTimeClosed != p.seen.MaxIdleTimeClosed ||
		st.MaxLifetimeClosed != p.seen.MaxLifetimeClosed
}

// sweepInterval is how often the janitor looks at the pools: a quarter of the idle timeout,
// within [10 ms, 1 min].
func (r *Router) sweepInterval() time.Duration {
	return min(max(r.cfg.PoolIdleTimeout/4, 10*time.Millisecond), time.Minute)
}

// startJanitorLocked starts the eviction goroutine once, when the first pool opens and eviction
// is on. r.mu is held.
func (r *Router) startJanitorLocked() {
	if r.janitor != nil || r.cfg.PoolIdleTimeout <= 0 {
		return
	}
	r.janitor = make(chan struct{})
	stop := r.janitor
	go func() {
		t := time.NewTicker(r.sweepInterval())
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				r.sweep(now)
			}
		}
	}()
}

// sweep evicts the pools unused for PoolIdleTimeout and closes the evicted ones that stayed
// unused for PoolIdleTimeout since. Eviction removes a pool from the map under the lock DB takes,
// so a DB call either refreshes a pool before the sweep looks at it or opens a new one after it;
// a caller that got the pool before its eviction keeps a working pool for at least another
// PoolIdleTimeout, and longer while it uses it. Closing waits for statements in flight.
func (r *Router) sweep(now time.Time) {
	idle := r.cfg.PoolIdleTimeout
	var toClose []*pool
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	for name, p := range r.pools {
		st := p.db.Stats()
		if p.busy(st) {
			p.lastUsed = now
		}
		p.seen = st
		if now.Sub(p.lastUsed) >= idle {
			delete(r.pools, name)
			p.retired = now
			r.retired = append(r.retired, p)
			r.evicted++
		}
	}
	kept := r.retired[:0]
	for _, p := range r.retired {
		st := p.db.Stats()
		if p.busy(st) {
			p.retired = now
		}
		p.seen = st
		if now.Sub(p.retired) >= idle {
			toClose = append(toClose, p)
			continue
		}
		kept = append(kept, p)
	}
	clear(r.retired[len(kept):])
	r.retired = kept
	r.mu.Unlock()
	for _, p := range toClose {
		_ = p.db.Close()
	}
}

// PoolStats counts a Router's tenant pools.
type PoolStats struct {
	Open    int   // pools in use: DB returns them
	Retired int   // evicted pools not closed yet
	Evicted int64 // pools evicted since the Router was created
}

// Pools returns the Router's pool counts.
func (r *Router) Pools() PoolStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return PoolStats{Open: len(r.pools), Retired: len(r.retired), Evicted: r.evicted}
}
