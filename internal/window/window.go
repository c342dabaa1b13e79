// Package window counts events per key in fixed time windows, in memory:
// the cheap signal behind "polls faster than asked" and "keeps hitting the
// rate limits". The previous window is dropped whole when a new one
// starts, so memory is bounded by one window's keys.
package window

import (
	"sync"
	"time"
)

// Counter counts events per key in windows of a fixed length. Safe for
// concurrent use; use New.
type Counter struct {
	length time.Duration
	mu     sync.Mutex
	start  time.Time
	counts map[string]int
}

// New returns a Counter with windows of the given length.
func New(length time.Duration) *Counter {
	return &Counter{length: length, counts: map[string]int{}}
}

// Add counts one event of key at now and returns the key's count in the
// current window.
func (c *Counter) Add(key string, now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.start) >= c.length || now.Before(c.start) {
		c.start, c.counts = now, map[string]int{}
	}
	c.counts[key]++
	return c.counts[key]
}
