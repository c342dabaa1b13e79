// Package window counts events per key in fixed time windows, in memory:
// the cheap signal behind "polls faster than asked" and "keeps hitting the
// rate limits". The previous window is dropped whole when a new one
// starts, so memory is bounded by the largest window's keys; the room is
// kept (the maps are cleared, not remade), so a crowd that fills one
// window does not pay to grow the next.
//
// A key is a pair of strings (a sale and a shopper), kept as its 64-bit
// hash: no key is copied or concatenated, and a window of two million
// shoppers takes tens of megabytes. Two pairs sharing a hash would share a
// count; at 64 bits that is about one chance in ten million for two
// million keys, and the counts only flag a shopper for a closer look.
//
// Overselling is neither prevented nor caused here.
package window

import (
	"hash/maphash"
	"sync"
	"time"
)

// stripes spreads the keys over locks, so that both cores count at once.
const stripes = 32

// Counter counts events per key in windows of a fixed length. Safe for
// concurrent use; use New.
type Counter struct {
	length  time.Duration
	seed    maphash.Seed
	stripes [stripes]stripe
}

type stripe struct {
	mu     sync.Mutex
	start  time.Time
	counts map[uint64]int32
	_      [24]byte // a cache line of its own
}

// New returns a Counter with windows of the given length.
func New(length time.Duration) *Counter {
	c := &Counter{length: length, seed: maphash.MakeSeed()}
	for i := range c.stripes {
		c.stripes[i].counts = map[uint64]int32{}
	}
	return c
}

// Add counts one event of the key (a, b) at now and returns the key's
// count in the current window.
func (c *Counter) Add(a, b string, now time.Time) int {
	key := pairKey(c.seed, a, b)
	s := &c.stripes[key%stripes]
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.start) >= c.length || now.Before(s.start) {
		s.start = now
		clear(s.counts)
	}
	s.counts[key]++
	return int(s.counts[key])
}

// pairKey is the key (a, b) as a 64-bit hash: no string copied or joined.
func pairKey(seed maphash.Seed, a, b string) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(a)
	h.WriteByte(0)
	h.WriteString(b)
	return h.Sum64()
}
