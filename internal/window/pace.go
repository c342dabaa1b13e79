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
type Pace struct {
	length  time.Duration
	seed    maphash.Seed
	stripes [stripes]paceStripe
}

type paceStripe struct {
	mu    sync.Mutex
	start time.Time
	keys  map[uint64]paceEntry
	_     [24]byte
}

type paceEntry struct {
	last  int64 // unix nanos of the key's previous event
	asked int32 // milliseconds it was asked to wait after it
	count int32 // events in the window
	early int32 // of which came sooner than half the wait asked
}

// NewPace returns a Pace with windows of the given length.
func NewPace(length time.Duration) *Pace {
	p := &Pace{length: length, seed: maphash.MakeSeed()}
	for i := range p.stripes {
		p.stripes[i].keys = map[uint64]paceEntry{}
	}
	return p
}

// Observe records an event of the key (a, b) at now, after which the key
// is asked to wait next (0: not asked to come back), and returns the key's
// events in the current window, how many of them came early, and whether
// this one did.
func (p *Pace) Observe(a, b string, now time.Time, next time.Duration) (count, early int, wasEarly bool) {
	key := pairKey(p.seed, a, b)
	s := &p.stripes[key%stripes]
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.start) >= p.length || now.Before(s.start) {
		s.start = now
		clear(s.keys)
	}
	e, seen := s.keys[key]
	wasEarly = seen && e.asked > 0 && now.UnixNano()-e.last < int64(e.asked)*int64(time.Millisecond)/2
	if wasEarly {
		e.early++
	}
	e.count++
	e.last, e.asked = now.UnixNano(), int32(min(next.Milliseconds(), 1<<31-1))
	s.keys[key] = e
	return int(e.count), int(e.early), wasEarly
}
