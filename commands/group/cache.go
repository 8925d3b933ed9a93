package group

import (
	"container/list"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// cacheEntry is one folded state in the loader's cache. Entries exist only for loaded states:
// invalidating a key the cache does not hold changes only its shard's generation.
type cacheEntry struct {
	key      stateKey
	state    any           // a domain.GroupState, MembershipState, RelationState or ProfileState
	version  int64         // the state's stream version
	verified time.Duration // loader clock at the start of the read that last confirmed state
	stale    bool          // invalidated since verified: the next cached use must read first
	gen      uint64        // bumped by every invalidation of this key
	used     atomic.Bool   // set by every hit; eviction gives used entries a second chance
	// readingAhead is set while a background read confirms the state before it expires.
	readingAhead atomic.Bool
	elem         *list.Element
}

// flight is a read of one key in progress that later cached loads of the same generation wait
// for instead of reading themselves.
type flight struct {
	done  chan struct{}
	shard uint64 // the shard generation when the read began
	state any
	err   error
}

// cacheShard is one lock's worth of the cache: a map plus an insertion-ordered list swept by a
// second-chance (clock) eviction, so hits need only the read lock and never reorder anything.
type cacheShard struct {
	mu      sync.RWMutex
	items   map[stateKey]*cacheEntry
	order   list.List // front = newest
	max     int
	gen     uint64 // bumped by every invalidation of a key of this shard, held or not
	flights map[stateKey]*flight
}

// stateCache is a size-bounded cache of folded states split into shards by key hash.
type stateCache struct {
	seed   maphash.Seed
	shards []*cacheShard
}

func newStateCache(maxEntries, shards int) *stateCache {
	c := &stateCache{seed: maphash.MakeSeed(), shards: make([]*cacheShard, shards)}
	per := (maxEntries + shards - 1) / shards
	for i := range c.shards {
		c.shards[i] = &cacheShard{items: make(map[stateKey]*cacheEntry), max: per, flights: make(map[stateKey]*flight)}
	}
	return c
}

func (c *stateCache) shard(k stateKey) *cacheShard {
	return c.shards[maphash.Comparable(c.seed, k)%uint64(len(c.shards))]
}

// insert adds an empty entry for key, evicting when the shard is full: from the oldest end, an
// entry used since it was last passed over is moved to the front with its mark cleared, the
// first one unused is dropped. The caller holds s.mu for writing and knows key is absent.
func (s *cacheShard) insert(key stateKey) *cacheEntry {
	for len(s.items) >= s.max {
		back := s.order.Back()
		if back == nil {
			break
		}
		old := back.Value.(*cacheEntry)
		if old.used.Swap(false) {
			s.order.MoveToFront(back)
			continue
		}
		s.order.Remove(back)
		delete(s.items, old.key)
	}
	e := &cacheEntry{key: key}
	e.elem = s.order.PushFront(e)
	s.items[key] = e
	return e
}

// remove drops key's entry. The caller holds s.mu for writing.
func (s *cacheShard) remove(key stateKey) {
	if e := s.items[key]; e != nil {
		s.order.Remove(e.elem)
		delete(s.items, key)
	}
}

// invalidate marks key stale. The caller holds s.mu for writing.
func (s *cacheShard) invalidate(key stateKey) {
	s.gen++
	if e := s.items[key]; e != nil {
		e.gen++
		e.stale = true
	}
}

// invalidateAll marks every entry stale. The caller holds s.mu for writing.
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
// A state older than the cached one is dropped. The caller holds s.mu for writing.
func (s *cacheShard) store(key stateKey, state any, version int64, start readStart) {
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
