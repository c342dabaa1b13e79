package memory

import (
	"math/bits"
	"sync/atomic"
)

// filter is a Bloom filter over the hashes of a sale's idempotency keys and
// spent admissions, read without the sale's lock. It may say "maybe" for a
// key the sale does not have, never "no" for one it has, so the fast path
// answers only when the filter says "no" and takes the lock otherwise.
//
// Bits are only ever set (with atomic OR, under the sale's lock); a key that
// is forgotten (a voided key, an admission a void gave back) keeps its bits until the
// filter is rebuilt, which costs a false "maybe", never a wrong answer.
type filter struct {
	mask  uint64
	words []atomic.Uint64
	// capacity is how many entries the filter takes before false "maybe"s
	// grow common (about 1.4% at 16 bits an entry with two probes).
	capacity int
}

const (
	filterBitsPerEntry = 16
	filterMinBits      = 1 << 13 // 1 KiB
	filterMaxBits      = 1 << 26 // 8 MiB: past this a huge sale just takes the lock more often
)

// newFilter returns an empty filter sized for about entries entries.
func newFilter(entries int) *filter {
	want := uint64(max(entries, 0)) * filterBitsPerEntry
	n := uint64(filterMinBits)
	if want > n {
		n = 1 << bits.Len64(want-1)
	}
	n = min(n, filterMaxBits)
	return &filter{mask: n - 1, words: make([]atomic.Uint64, n/64), capacity: int(n / filterBitsPerEntry)}
}

// The two probes come from the two halves of the 64-bit hash; the mask is
// at most 26 bits wide, so they do not overlap.
func (f *filter) add(h uint64) {
	a, b := h&f.mask, (h>>32)&f.mask
	f.words[a>>6].Or(1 << (a & 63))
	f.words[b>>6].Or(1 << (b & 63))
}

func (f *filter) mayHave(h uint64) bool {
	a, b := h&f.mask, (h>>32)&f.mask
	return f.words[a>>6].Load()&(1<<(a&63)) != 0 && f.words[b>>6].Load()&(1<<(b&63)) != 0
}
