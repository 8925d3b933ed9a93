package ratelimit

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/imledger/imledger/domain"
)

// leaseWindow is the share of a limit a node counts ahead at once: two seconds' worth.
const leaseWindow = 2 * time.Second

// maxLease bounds the requests counted ahead in one round trip.
const maxLease = 128

// minPrefetch is the smallest lease that is refilled ahead of need: a smaller one (a limit under
// 240 a minute) would count a request ahead for a sender who may never make it.
const minPrefetch = 4

// leaseSize is how many requests a node counts at once against limit (per minute): leaseWindow's
// share, 1..maxLease. A limit under 30 a minute is counted one request at a time, exactly.
func leaseSize(limit int) int {
	return min(max(int(int64(limit)*int64(leaseWindow)/int64(time.Minute)), 1), maxLease)
}

// leaseTTL is how long a node may use a lease of size counted against limit (per minute): the
// time the limit takes to grant size requests. A node counts at most one lease per lease life, so
// it never counts faster than the limit and a sender below the limit is never refused because of
// leases; leftovers are dropped, which makes the limit stricter, never looser.
func leaseTTL(size, limit int) time.Duration {
	return time.Duration(int64(size) * int64(time.Minute) / int64(max(limit, 1)))
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
	m  map[leaseKey]lease
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
	size      int
	exp       time.Time
	refilling bool // a round trip counts the next lease
}

// take uses one request of key's lease. When there is one, count reports that it is half used
// and no count is under way: the caller then counts the next lease ahead (counted or
// countFailed), so a busy sender does not wait for Redis when this one runs out. When there is
// none (ok false), count reports that the caller is to count a whole lease (the same); while
// that count or a refill is under way, the sends that find no lease count only themselves,
// so a crowd arriving at an empty lease does not count a lease each.
// A sender that stops leaves less than three leases unused: stricter by under three leases,
// never looser.
func (l *leases) take(key leaseKey, now time.Time) (ok, count bool) {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ls, found := sh.m[key]
	if !found || ls.left == 0 || now.After(ls.exp) {
		if ls.refilling {
			return false, false
		}
		ls.refilling = true
		sh.set(key, ls, now)
		return false, true
	}
	ls.left--
	if ls.size >= minPrefetch && !ls.refilling && ls.left <= ls.size/2 {
		ls.refilling, count = true, true
	}
	sh.m[key] = ls
	return true, count
}

// give returns one request to key's lease (the other limit of a send refused it).
func (l *leases) give(key leaseKey, now time.Time) {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if ls, ok := sh.m[key]; ok && now.Before(ls.exp) {
		ls.left++
		sh.m[key] = ls
	}
}

// counted ends key's count (a whole lease counted by a send, or a refill) with got requests
// counted against limit, used of them by the send that counted them. The lease's life is
// extended by the time the limit takes to grant got, from its end or from now, whichever is
// later: over any stretch of time a node counts no faster than the limit, so a sender below the
// limit is never refused because of leases, even when a refill was counted before the lease it
// refills ran out.
func (l *leases) counted(key leaseKey, got, used, limit int, now time.Time) {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ls := sh.m[key]
	if now.After(ls.exp) {
		ls.left, ls.exp = 0, now
	}
	ls.left += got - used
	ls.size = leaseSize(limit)
	ls.exp = ls.exp.Add(leaseTTL(got, limit))
	ls.refilling = false
	sh.set(key, ls, now)
}

// countFailed ends key's count without a lease: it runs out and the next send asks Redis itself.
func (l *leases) countFailed(key leaseKey) {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if ls, ok := sh.m[key]; ok {
		ls.refilling = false
		sh.m[key] = ls
	}
}

// set stores ls under key, first dropping the expired leases when the map is large. sh.mu is held.
func (sh *leaseShard) set(key leaseKey, ls lease, now time.Time) {
	if sh.m == nil {
		sh.m = map[leaseKey]lease{}
	}
	if len(sh.m) >= 1<<12 {
		for k, old := range sh.m {
			if now.After(old.exp) && !old.refilling {
				delete(sh.m, k)
			}
		}
	}
	sh.m[key] = ls
}
