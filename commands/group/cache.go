package group

import (
	"container/list"
	"hash/maphash"
	"sync"
	"time"
)

// cacheEntry is one folded state in the loader's cache. An entry whose state was never loaded
// does not exist: invalidating a key the cache does not hold changes only its shard's generation.
type cacheEntry struct {
	key      string
	state    any           // a domain.GroupState, MembershipState, RelationState or ProfileState
	version  int64         // the state's stream version
	verified time.Duration // loader clock at the start of the read that last confirmed state
	stale    bool          // invalidated since verified: the next cached use must read first
	gen      uint64        // bumped by every invalidation of this key
	elem     *list.Element
}

// flight is a read of one key in progress that later cached loads of the same generation wait
// for instead of reading themselves.
type flight struct {
	done  chan struct{}
	shard uint64 // the shard generation when the read began
	state any
	err   error
}

// cacheShard is one lock's worth of the cache: a map plus a recency list, front = most recent.
type cacheShard struct {
	mu      sync.Mutex
	items   map[string]*cacheEntry
	order   list.List
	max     int
	gen     uint64 // bumped by every invalidation of a key of this shard, held or not
	flights map[string]*flight
}

// stateCache is a size-bounded LRU of folded states split into shards by key hash.
type stateCache struct {
	seed   maphash.Seed
	shards []*cacheShard
}

func newStateCache(maxEntries, shards int) *stateCache {
	c := &stateCache{seed: maphash.MakeSeed(), shards: make([]*cacheShard, shards)}
	per := (maxEntries + shards - 1) / shards
	for i := range c.shards {
		c.shards[i] = &cacheShard{items: make(map[string]*cacheEntry), max: per, flights: make(map[string]*flight)}
	}
	return c
}

func (c *stateCache) shard(key string) *cacheShard {
	return c.shards[maphash.String(c.seed, key)%uint64(len(c.shards))]
}

// lookup returns the entry of key and marks it most recently used; nil when absent. The caller
// holds s.mu.
func (s *cacheShard) lookup(key string) *cacheEntry {
	e := s.items[key]
	if e != nil {
		s.order.MoveToFront(e.elem)
	}
	return e
}

// insert adds an empty entry for key, evicting the least recently used entry when the shard is
// full. The caller holds s.mu and knows key is absent.
func (s *cacheShard) insert(key string) *cacheEntry {
	for len(s.items) >= s.max {
		back := s.order.Back()
		if back == nil {
			break
		}
		old := back.Value.(*cacheEntry)
		s.order.Remove(back)
		delete(s.items, old.key)
	}
	e := &cacheEntry{key: key}
	e.elem = s.order.PushFront(e)
	s.items[key] = e
	return e
}

// invalidate marks key stale. The caller holds s.mu.
func (s *cacheShard) invalidate(key string) {
	s.gen++
	if e := s.items[key]; e != nil {
		e.gen++
		e.stale = true
	}
}

// invalidateAll marks every entry stale. The caller holds s.mu.
func (s *cacheShard) invalidateAll() {
	s.gen++
	for _, e := range s.items {
		e.gen++
		e.stale = true
	}
}

// readStart is what a load remembers of the cache when its read begins, to tell afterwards
// whether an invalidation may have crossed the read.
type readStart struct {
	at       time.Duration
	entry    *cacheEntry
	entryGen uint64
	shardGen uint64
}

// store saves a state read from the store. The state counts as verified at start.at only when
// no invalidation of the key can have happened since the read began: the entry held then is
// still the same and its generation unchanged, or (no entry then) the shard saw no invalidation.
// A state older than the cached one is dropped. The caller holds s.mu.
func (s *cacheShard) store(key string, state any, version int64, start readStart) {
	e := s.items[key]
	if e == nil {
		e = s.insert(key)
	} else if e.state != nil && version < e.version {
		return
	}
	e.state, e.version = state, version
	untouched := start.shardGen == s.gen || (start.entry != nil && start.entry == e && start.entryGen == e.gen)
	if untouched {
		e.stale = false
		e.verified = max(e.verified, start.at)
	} else {
		e.stale = true
	}
}
