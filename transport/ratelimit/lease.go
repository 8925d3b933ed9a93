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
	left int
	exp  time.Time
}

// take uses one request of key's lease; false when there is none left.
func (l *leases) take(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.m[key]
	if !ok || ls.left == 0 || now.After(ls.exp) {
		return false
	}
	ls.left--
	l.m[key] = ls
	return true
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

// put records left requests counted ahead for key.
func (l *leases) put(key string, left int, now time.Time) {
	if left <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]lease{}
	}
	if len(l.m) >= 1<<16 {
		for k, ls := range l.m {
			if now.After(ls.exp) {
				delete(l.m, k)
			}
		}
	}
	l.m[key] = lease{left: left, exp: now.Add(leaseTTL)}
}
