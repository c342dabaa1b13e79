package window

import (
	"hash/maphash"
	"sync"
	"time"
)

// Pace watches, per key, how often events come and whether they come
// sooner than the key was asked to wait: the waiting room tells each poll
// when to come back, and a client that keeps coming back in less than half
// that time is not following the page. Windows of a fixed length bound the
// memory, as Counter's do; keys are hashed the same way.
//
// Every poll of a sale passes here, and in a crowd of millions each one
// finds its key cold in memory, so the keys live in a flat table of their
// own (paceTable) where a lookup costs one cache line, not the two or more
// of a general map.
type Pace struct {
	length  time.Duration
	seed    maphash.Seed
	stripes [stripes]paceStripe
}

type paceStripe struct {
	mu    sync.Mutex
	start time.Time
	keys  paceTable
	_     [16]byte
}

// NewPace returns a Pace with windows of the given length, at most
// maxPaceWindow.
func NewPace(length time.Duration) *Pace {
	return &Pace{length: min(length, maxPaceWindow), seed: maphash.MakeSeed()}
}

// Observe records an event of the key (a, b) at now, after which the key
// is asked to wait next (0: not asked to come back), and returns the key's
// events in the current window, how many of them came early, and whether
// this one did. A wait asked is kept to the millisecond up to about 65 s
// (longer ones count as that); the counts stop at 1023 events and 15 early
// ones, far past any limit they are held against.
func (p *Pace) Observe(a, b string, now time.Time, next time.Duration) (count, early int, wasEarly bool) {
	key := pairKey(p.seed, a, b)
	s := &p.stripes[key%stripes]
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.start) >= p.length || now.Before(s.start) {
		s.start = now
		s.keys.clear()
	}
	e, seen := s.keys.entry(key)
	at := uint64(now.Sub(s.start).Microseconds())
	last, asked, n, ne := e.unpack()
	wasEarly = seen && asked > 0 && at-last < asked*1000/2
	if wasEarly && ne < maxEarly {
		ne++
	}
	if n < maxCount {
		n++
	}
	e.pack(at, uint64(min(max(next.Milliseconds(), 0), maxAsked)), n, ne)
	return int(n), int(ne), wasEarly
}

// paceSlot is one key's pace in the current window: 16 bytes, four to a
// cache line, so a slot never straddles two and a crowd of two million
// keys is 32 MB at most, not 64. The key's previous event, the wait it was
// asked then and its counts are packed in one word.
type paceSlot struct {
	key uint64 // 0: the slot is free (a key hashed to 0 is kept as 1)
	// v is, from the low bits: the previous event, in microseconds from
	// the window's start (34 bits); the milliseconds it was asked to wait
	// after it (16); events in the window (10); of which came sooner than
	// half the wait asked (4).
	v uint64
}

const (
	lastBits, askedBits, countBits, earlyBits = 34, 16, 10, 4

	maxAsked = 1<<askedBits - 1
	maxCount = 1<<countBits - 1
	maxEarly = 1<<earlyBits - 1
	// maxPaceWindow is the longest window whose offsets fit lastBits.
	maxPaceWindow = (1<<lastBits - 1) * time.Microsecond
)

func (s *paceSlot) unpack() (last, asked, count, early uint64) {
	v := s.v
	return v & (1<<lastBits - 1), v >> lastBits & maxAsked, v >> (lastBits + askedBits) & maxCount,
		v >> (lastBits + askedBits + countBits)
}

func (s *paceSlot) pack(last, asked, count, early uint64) {
	s.v = last | asked<<lastBits | count<<(lastBits+askedBits) | early<<(lastBits+askedBits+countBits)
}

// paceTable is an open-addressing hash table of paceSlots with linear
// probing, never more than three quarters full. It holds no pointers, so
// the garbage collector never scans it, and clearing it for a new window
// keeps its room.
type paceTable struct {
	slots []paceSlot
	used  int
}

// entry returns the key's slot, claiming a free one if the key has none,
// and whether the key was there.
func (t *paceTable) entry(key uint64) (*paceSlot, bool) {
	if key == 0 {
		key = 1
	}
	if (t.used+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	// The low bits chose the stripe; the high bits place the key.
	for i := (key >> 32) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		switch s.key {
		case key:
			return s, true
		case 0:
			s.key = key
			t.used++
			return s, false
		}
	}
}

// grow doubles the table (from 64 slots) and places every key again.
func (t *paceTable) grow() {
	old := t.slots
	t.slots, t.used = make([]paceSlot, max(64, 2*len(old))), 0
	for i := range old {
		if old[i].key != 0 {
			s, _ := t.entry(old[i].key)
			*s = old[i]
		}
	}
}

// clear empties the table and keeps its room.
func (t *paceTable) clear() {
	clear(t.slots)
	t.used = 0
}
