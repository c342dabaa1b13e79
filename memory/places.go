package memory

import (
	"math"
	"math/bits"
)

// placeTable is one shard's places: an open-addressing table of fixed-width
// slots, 24 bytes a place with no pointer in them, where a Go map of the
// same places cost about twice that (84 bytes a place at two million, by
// measure, with the map's groups and growth). Places are the one thing a
// shopper of a big sale leaves in the queue, so their width is the queue's
// size. Not safe for concurrent use: the shard's lock guards it.
//
// A slot keeps the user key whole (both 64-bit halves, so that two
// shoppers share a place only if they share 128 bits), the position in 32
// bits, and the arrival in 32 bits as milliseconds from the table's base,
// the first arrival it kept: ±24 days around it. A place whose position or
// arrival does not fit (a queue of more than four billion, a sale queueing
// for weeks) goes to a map beside the slots, so every place is kept exactly.
type placeTable struct {
	slots []placeSlot // empty where pos == 0 (positions start at 1)
	n     int         // slots in use
	base  int64       // unix ms the slots' arrivals count from, once based
	based bool
	over  map[userKey]place
}

type placeSlot struct {
	k       userKey
	pos     uint32
	arrival int32 // unix ms - base
}

// maxLoad is the share of slots in use past which the table grows by half:
// its load stays between about 0.57 and 0.85, where linear probing still
// finds a place in a probe or two.
const maxLoad = 0.85

// index is where k's probe starts: the second half of the key, which the
// shard choice (by the first) leaves uniform, scaled to the table.
func (t *placeTable) index(k userKey) int {
	hi, _ := bits.Mul64(k[1], uint64(len(t.slots)))
	return int(hi)
}

// get returns k's place.
func (t *placeTable) get(k userKey) (place, bool) {
	if len(t.slots) > 0 {
		for i := t.index(k); ; i++ {
			if i == len(t.slots) {
				i = 0
			}
			s := &t.slots[i]
			if s.pos == 0 {
				break
			}
			if s.k == k {
				return place{pos: int64(s.pos), arrival: t.base + int64(s.arrival)}, true
			}
		}
	}
	p, ok := t.over[k]
	return p, ok
}

// put keeps k's place; k has none yet.
func (t *placeTable) put(k userKey, p place) {
	if !t.based {
		t.base, t.based = p.arrival, true
	}
	rel := p.arrival - t.base
	if p.pos <= 0 || p.pos > math.MaxUint32 || rel < math.MinInt32 || rel > math.MaxInt32 {
		if t.over == nil {
			t.over = map[userKey]place{}
		}
		t.over[k] = p
		return
	}
	if float64(t.n+1) > maxLoad*float64(len(t.slots)) {
		t.grow()
	}
	t.insert(placeSlot{k: k, pos: uint32(p.pos), arrival: int32(rel)})
	t.n++
}

func (t *placeTable) insert(s placeSlot) {
	for i := t.index(s.k); ; i++ {
		if i == len(t.slots) {
			i = 0
		}
		if t.slots[i].pos == 0 {
			t.slots[i] = s
			return
		}
	}
}

func (t *placeTable) grow() {
	old := t.slots
	t.slots = make([]placeSlot, max(16, len(old)+len(old)/2))
	for _, s := range old {
		if s.pos != 0 {
			t.insert(s)
		}
	}
}

// each calls f with every place.
func (t *placeTable) each(f func(userKey, place)) {
	for _, s := range t.slots {
		if s.pos != 0 {
			f(s.k, place{pos: int64(s.pos), arrival: t.base + int64(s.arrival)})
		}
	}
	for k, p := range t.over {
		f(k, p)
	}
}

func (t *placeTable) len() int { return t.n + len(t.over) }
