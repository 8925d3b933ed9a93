package ratelimit

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/imledger/imledger/domain"
)

// leaseWindow is the stretch of a sender's demand a node counts ahead at once: two seconds of
// the requests its sends made since the last count, at most two seconds' share of the limit.
const leaseWindow = 2 * time.Second

// maxLease bounds the requests counted ahead in one round trip.
const maxLease = 128

// minPrefetch is the smallest lease that is refilled ahead of need: a smaller one is for a sender
// of under two requests a second (or a limit under 120 a minute), which may never make the
// requests counted ahead.
const minPrefetch = 4

// leaseSize is the largest lease a node counts at once against limit (per minute): leaseWindow's
// share, 1..maxLease. A limit under 30 a minute is counted one request at a time, exactly.
func leaseSize(limit int) int {
	return min(max(int(int64(limit)*int64(leaseWindow)/int64(time.Minute)), 1), maxLease)
}

// leaseTTL is how long a node may use a lease of size counted against limit (per minute): the
// lease window, or the time the limit takes to grant size requests when that is longer (a lease of
// one under a limit of less than 30 a minute). A lease is never more than its life's share of
// the limit, and leftovers are dropped, which makes the limit stricter, never looser.
func leaseTTL(size, limit int) time.Duration {
	return max(leaseWindow, time.Duration(int64(size)*int64(time.Minute)/int64(max(limit, 1))))
}

// leaseShards spreads the leases over locks of their own: every send takes two.
const leaseShards = 32

// leases are the requests this node counted ahead, by key.
type leases struct {
	seed   maphash.Seed
	once   sync.Once
	shards [leaseShards]leaseShard
}

type leaseShard struct {
	mu sync.Mutex
	m  map[leaseKey]*lease // one lookup per use: the lease is changed in place
}

// leaseKey names one counter; its Redis key is built only when a send goes to Redis.
type leaseKey struct {
	tenant  domain.TenantID
	kind    domain.RateLimitKind
	subject string
}

// redisKey is k's key in Redis: <prefix><tenant>:rl:<kind>:{<subject>}.
func (k leaseKey) redisKey(prefix string) string {
	return prefix + k.tenant.String() + ":rl:" + string(k.kind) + ":{" + k.subject + "}"
}

func (l *leases) shard(key leaseKey) *leaseShard {
	l.once.Do(func() { l.seed = maphash.MakeSeed() })
	return &l.shards[maphash.String(l.seed, key.subject)%leaseShards]
}

type lease struct {
	left      int
	size      int // the last count: the next is counted ahead when a quarter of it is left
	exp       time.Time
	refilling bool      // a round trip counts the next lease
	used      int       // requests taken since the last count began, its own included
	since     time.Time // when the last count began
}

// take uses one request of key's lease, whose limit is limit. n > 0 asks the caller to count n
// requests in Redis and to end the count with counted or countFailed: with ok, the lease is down
// to a quarter and n is its refill, counted ahead so that a busy sender does not wait for Redis;
// without ok, there is no lease and the send waits for a lease of n, of which it uses one. While
// a count is under way the sends that find no lease count only themselves (ok false, n 0), so a
// crowd arriving at an empty lease does not count a lease each.
//
// n is the sender's demand: what its sends took since the last count, at their rate over a lease
// window (demand). A node counts about what it uses, so a sender or a topic below its limit on
// several nodes at once is not refused for requests counted and never made; a sender that stops
// leaves less than a lease and a quarter of its own demand unused (stricter, never looser).
func (l *leases) take(key leaseKey, limit int, now time.Time) (ok bool, n int) {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ls := sh.m[key]
	if ls == nil {
		ls = sh.add(key, now)
	}
	ls.used++
	if ls.left == 0 || now.After(ls.exp) {
		if !ls.refilling {
			ls.refilling, n = true, ls.demand(limit, now)
		}
		return false, n
	}
	ls.left--
	if ls.size >= minPrefetch && !ls.refilling && ls.left <= ls.size/4 {
		ls.refilling, n = true, ls.demand(limit, now)
	}
	return true, n
}

// demand is the lease to count now: the requests taken since the last count, at their rate over
// a lease window, 1..leaseSize(limit) (1 for a key counted for the first time). It starts the next
// measurement.
func (ls *lease) demand(limit int, now time.Time) int {
	most, n := leaseSize(limit), 1
	if !ls.since.IsZero() {
		n = most
		if el := now.Sub(ls.since); el > 0 {
			n = int(int64(ls.used) * int64(leaseWindow) / int64(el))
		}
	}
	ls.used, ls.since = 0, now
	return min(max(n, 1), most)
}

// give returns one request to key's lease (the other limit of a send refused it).
func (l *leases) give(key leaseKey, now time.Time) {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if ls := sh.m[key]; ls != nil && now.Before(ls.exp) {
		ls.left++
	}
}

// counted ends key's count (a whole lease counted by a send, or a refill) with got requests
// counted against limit, used of them by the send that counted them. The lease's life is
// extended by its TTL from its end or from now, whichever is later.
func (l *leases) counted(key leaseKey, got, used, limit int, now time.Time) {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ls := sh.m[key]
	if ls == nil { // dropped while counted (a map that grew large)
		ls = sh.add(key, now)
	}
	if now.After(ls.exp) {
		ls.left, ls.exp = 0, now
	}
	ls.left += got - used
	ls.size = got
	ls.exp = ls.exp.Add(leaseTTL(got, limit))
	ls.refilling = false
}

// countFailed ends key's count without a lease: it runs out and the next send asks Redis itself.
func (l *leases) countFailed(key leaseKey) {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if ls := sh.m[key]; ls != nil {
		ls.refilling = false
	}
}

// add stores an empty lease under key, first dropping the expired leases when the map is large.
// sh.mu is held.
func (sh *leaseShard) add(key leaseKey, now time.Time) *lease {
	if sh.m == nil {
		sh.m = map[leaseKey]*lease{}
	}
	if len(sh.m) >= 1<<12 {
		for k, old := range sh.m {
			if now.After(old.exp) && !old.refilling {
				delete(sh.m, k)
			}
		}
	}
	ls := &lease{}
	sh.m[key] = ls
	return ls
}
