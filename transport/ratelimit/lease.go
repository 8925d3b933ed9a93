package ratelimit

import (
	"sync"
	"time"
)

// leaseTTL is how long a node may use the requests it counted ahead. Over a lease's life a node
// counts at most one second's share of the limit, so a sender below the limit is never refused
// because of leases; leftovers are dropped, which makes the limit stricter, never looser.
const leaseTTL = time.Second

// maxLease bounds the requests counted ahead in one round trip.
const maxLease = 16

// minPrefetch is the smallest lease that is refilled ahead of need: a smaller one (a limit under
// 240 a minute) would count a request ahead for a sender who may never make it.
const minPrefetch = 4

// leaseSize is how many requests a node counts at once against limit (per minute): one second's
// share, 1..maxLease. A limit under 60 a minute is counted one request at a time, exactly.
func leaseSize(limit int) int {
	return min(max(limit/60, 1), maxLease)
}

// leases are the requests this node counted ahead, by key.
type leases struct {
	mu sync.Mutex
	m  map[string]lease
}

type lease struct {
	left      int
	size      int
	exp       time.Time
	refilling bool // a round trip counts the next lease ahead
}

// take uses one request of key's lease; false when there is none left. refill reports that the
// lease is half used and no refill is under way: the caller then counts the next lease ahead
// (refilled or refillFailed), so a busy sender does not wait for Redis when this one runs out.
// A sender that stops leaves less than three leases unused: stricter by under three seconds'
// share, never looser.
func (l *leases) take(key string, now time.Time) (ok, refill bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, found := l.m[key]
	if !found || ls.left == 0 || now.After(ls.exp) {
		return false, false
	}
	ls.left--
	if ls.size >= minPrefetch && !ls.refilling && ls.left <= ls.size/2 {
		ls.refilling, refill = true, true
	}
	l.m[key] = ls
	return true, refill
}

// give returns one request to key's lease (the other limit of a send refused it).
func (l *leases) give(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls, ok := l.m[key]; ok && now.Before(ls.exp) {
		ls.left++
		l.m[key] = ls
	}
}

// put records left requests counted ahead for key out of a lease of size.
func (l *leases) put(key string, left, size int, now time.Time) {
	if left <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.set(key, lease{left: left, size: size, exp: now.Add(leaseTTL)}, now)
}

// refilled adds got requests counted ahead to key's lease, which lives on for leaseTTL.
func (l *leases) refilled(key string, got, size int, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := l.m[key]
	if now.After(ls.exp) {
		ls.left = 0
	}
	l.set(key, lease{left: ls.left + got, size: size, exp: now.Add(leaseTTL)}, now)
}

// refillFailed ends key's refill: the lease runs out and the next send asks Redis itself.
func (l *leases) refillFailed(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls, ok := l.m[key]; ok {
		ls.refilling = false
		l.m[key] = ls
	}
}

// set stores ls under key, first dropping the expired leases when the map is large. l.mu is held.
func (l *leases) set(key string, ls lease, now time.Time) {
	if l.m == nil {
		l.m = map[string]lease{}
	}
	if len(l.m) >= 1<<16 {
		for k, old := range l.m {
			if now.After(old.exp) && !old.refilling {
				delete(l.m, k)
			}
		}
	}
	l.m[key] = ls
}
