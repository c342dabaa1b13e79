package memory

import (
	"math/bits"
	"sync/atomic"
)

// key is what a table entry is found by: one string, or two for an
// idempotency key (user id, key).
type key struct{ a, b string }

// table is an open-addressing hash table (linear probing) keyed by a 64-bit
// seeded hash of the key, computed before the sale's lock is taken. A
// probe that meets the hash checks the key itself (is), so two keys with
// one hash are simply two entries.
//
// Why not a Go map: a win looks up five keys in five tables of a sale that
// has stopped fitting in cache, and under the lock each miss to memory
// stalls every other shopper. A table's slots can be read atomically
// without the lock (touch), so a reserve pulls its slots into cache before
// it queues for the lock, and the probes under the lock hit cache. Values
// are read and written only under the sale's lock.
type table[V any] struct {
	slots atomic.Pointer[[]slot[V]]
	live  int // entries
	used  int // entries and tombstones
	is    func(V, key) bool
}

// slot holds an entry next to its tag, so that touching the tag brings the
// value's cache line too.
type slot[V any] struct {
	// tag is 0 for a never-used slot, 1 for a deleted entry, else the
	// entry's hash (fixHash keeps hashes above 1).
	tag atomic.Uint64
	val V
}

const (
	tagEmpty   = 0
	tagDeleted = 1
	tableMin   = 16
)

// fixHash moves a hash off the two tags that mean "no entry".
func fixHash(h uint64) uint64 {
	if h <= tagDeleted {
		h += 2
	}
	return h
}

// init readies the table with room for n entries before it grows.
func (t *table[V]) init(n int, is func(V, key) bool) {
	t.is = is
	t.alloc(n)
}

// alloc gives the table empty slots for n entries at a load of at most
// three quarters.
func (t *table[V]) alloc(n int) {
	size := tableMin
	if want := n + n/3 + 1; want > size {
		size = 1 << bits.Len(uint(want-1))
	}
	s := make([]slot[V], size)
	t.slots.Store(&s)
	t.live, t.used = 0, 0
}

// touch reads the slot where h's probe starts, without the lock, to bring
// it into cache. (The compiler keeps atomic loads whose value is unused.)
func (t *table[V]) touch(h uint64) {
	s := *t.slots.Load()
	s[h&uint64(len(s)-1)].tag.Load()
}

// find returns the index of k's entry, or -1.
func (t *table[V]) find(s []slot[V], h uint64, k key) int {
	mask := uint64(len(s) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch tag := s[i].tag.Load(); {
		case tag == tagEmpty:
			return -1
		case tag == h && t.is(s[i].val, k):
			return int(i)
		}
	}
}

func (t *table[V]) get(h uint64, k key) (V, bool) {
	s := *t.slots.Load()
	if i := t.find(s, h, k); i >= 0 {
		return s[i].val, true
	}
	var zero V
	return zero, false
}

// put sets k's value, adding the entry if there is none.
func (t *table[V]) put(h uint64, k key, v V) {
	s := *t.slots.Load()
	mask := uint64(len(s) - 1)
	reuse := -1
	for i := h & mask; ; i = (i + 1) & mask {
		switch tag := s[i].tag.Load(); {
		case tag == tagEmpty:
			if reuse < 0 {
				reuse = int(i)
				t.used++
			}
			s[reuse].val = v
			s[reuse].tag.Store(h)
			t.live++
			if t.used > len(s)-len(s)/4 {
				t.rehash()
			}
			return
		case tag == tagDeleted:
			if reuse < 0 {
				reuse = int(i)
			}
		case tag == h && t.is(s[i].val, k):
			s[i].val = v
			return
		}
	}
}

// del removes k's entry, if any, leaving a tombstone so that probes for
// other keys still pass over it.
func (t *table[V]) del(h uint64, k key) {
	s := *t.slots.Load()
	if i := t.find(s, h, k); i >= 0 {
		var zero V
		s[i].val = zero
		s[i].tag.Store(tagDeleted)
		t.live--
	}
}

// rehash moves the entries to fresh slots, twice as many as they need,
// which also clears the tombstones.
func (t *table[V]) rehash() {
	old := *t.slots.Load()
	t.alloc(2 * t.live)
	s := *t.slots.Load()
	mask := uint64(len(s) - 1)
	for j := range old {
		h := old[j].tag.Load()
		if h <= tagDeleted {
			continue
		}
		i := h & mask
		for s[i].tag.Load() != tagEmpty {
			i = (i + 1) & mask
		}
		s[i].val = old[j].val
		s[i].tag.Store(h)
		t.live++
		t.used++
	}
}

func (t *table[V]) len() int { return t.live }

// each calls fn with every entry's hash and value.
func (t *table[V]) each(fn func(h uint64, v V)) {
	s := *t.slots.Load()
	for i := range s {
		if h := s[i].tag.Load(); h > tagDeleted {
			fn(h, s[i].val)
		}
	}
}
