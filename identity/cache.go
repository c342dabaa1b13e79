package identity

import (
	"strings"
	"sync"
	"time"
)

// cache keeps verified tokens in two generations: new entries go into cur;
// when cur is full it becomes old and a fresh cur starts, so the oldest half
// is dropped at once. A hit in old moves the entry to cur, so a token in use
// survives. This bounds the cache at 2*half entries with no per-entry
// bookkeeping, which is all a cache of pollers' tokens needs.
type cache struct {
	mu   sync.Mutex
	half int
	cur  map[string]entry
	old  map[string]entry
}

// entry is what a verified token decided, and what a hit must still check
// against the time.
type entry struct {
	shopper   Shopper
	notBefore time.Time // zero: the token has no nbf
}

func newCache(entries int) *cache {
	half := max(entries/2, 1)
	return &cache{half: half, cur: make(map[string]entry, half)}
}

func (c *cache) get(tok string) (entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cur[tok]; ok {
		return e, true
	}
	e, ok := c.old[tok]
	if ok {
		delete(c.old, tok)
		c.addLocked(tok, e)
	}
	return e, ok
}

func (c *cache) put(tok string, e entry) {
	// The key is copied so that the cache does not keep alive whatever
	// larger buffer the header value was cut from.
	tok = strings.Clone(tok)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(tok, e)
}

func (c *cache) addLocked(tok string, e entry) {
	if _, ok := c.cur[tok]; !ok && len(c.cur) >= c.half {
		c.old, c.cur = c.cur, make(map[string]entry, c.half)
	}
	c.cur[tok] = e
}

func (c *cache) remove(tok string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.cur, tok)
	delete(c.old, tok)
}

// len returns the number of entries, for tests.
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.old)
}
