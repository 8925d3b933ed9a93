package shred

import (
	"crypto/cipher"
	"sync"
	"time"

	"github.com/imledger/imledger/domain"
)

// keyCache holds unwrapped data keys (nil: destroyed) until they expire, at most max of them.
type keyCache struct {
	mu    sync.RWMutex
	max   int
	items map[keyID]cacheEntry
}

type cacheEntry struct {
	aead    cipher.AEAD // nil: the key is destroyed
	expires time.Time
}

func newKeyCache(max int) *keyCache {
	return &keyCache{max: max, items: make(map[keyID]cacheEntry)}
}

// get returns the cached cipher of id (nil for a destroyed key) while it is fresh.
func (c *keyCache) get(id keyID, now time.Time) (cipher.AEAD, bool) {
	c.mu.RLock()
	e, ok := c.items[id]
	c.mu.RUnlock()
	if !ok || !now.Before(e.expires) {
		return nil, false
	}
	return e.aead, true
}

// put caches id until expires, dropping an arbitrary entry when full.
func (c *keyCache) put(id keyID, aead cipher.AEAD, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[id]; !ok && len(c.items) >= c.max {
		for k := range c.items {
			delete(c.items, k)
			break
		}
	}
	c.items[id] = cacheEntry{aead: aead, expires: expires}
}

// dropBefore forgets every key of tenant of the months before month.
func (c *keyCache) dropBefore(tenant domain.TenantID, month string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.items {
		if k.tenant == tenant && k.ref.Month < month {
			delete(c.items, k)
		}
	}
}

// dropUser forgets every key of user in tenant.
func (c *keyCache) dropUser(tenant domain.TenantID, user domain.UserID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.items {
		if k.tenant == tenant && k.ref.User == user {
			delete(c.items, k)
		}
	}
}
