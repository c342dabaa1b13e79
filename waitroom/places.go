package waitroom

import (
	"hash/maphash"
	"sync"
	"time"
)

// places remembers the places the queue has given, with their signed
// tickets, so that a shopper who asks again (the crowd's refresh, the
// commonest request of a sale) is answered from memory instead of with a
// round trip to the shared queue and a signature. A ticket's token is
// deterministic (the same place signs to the same bytes), so the
// remembered one is exactly the one that would be signed again.
//
// It can, because a place never changes once given: the contract's
// "asking again never returns a better place", and the queue's Join
// returns the same place on every call. Only final places are kept: real
// places, and NotSelected once the draw has run; a place still pending a
// draw is asked again. Keys carry the sale's id, which no other sale
// shares. Several edges each keep their own; all learnt from one queue,
// they agree.
//
// It is bounded: a shard that fills up is emptied, and the places in it
// are learnt again from the queue on their next ask. Safe for concurrent
// use.
type places struct {
	seed     maphash.Seed
	perShard int
	shards   [placeShards]placeShard
}

const placeShards = 64

type placeKey struct{ sale, user string }

type place struct {
	position int64
	arrival  time.Time
	ticket   string // the signed ticket of this place
}

type placeShard struct {
	mu sync.RWMutex
	m  map[placeKey]place
}

// newPlaces returns a cache of about capacity places; nil (no cache) when
// capacity is negative.
func newPlaces(capacity int) *places {
	if capacity < 0 {
		return nil
	}
	p := &places{seed: maphash.MakeSeed(), perShard: max(1, capacity/placeShards)}
	for i := range p.shards {
		p.shards[i].m = map[placeKey]place{}
	}
	return p
}

func (p *places) shard(userID string) *placeShard {
	return &p.shards[maphash.String(p.seed, userID)%placeShards]
}

// get returns the shopper's remembered place in the sale.
func (p *places) get(saleID, userID string) (place, bool) {
	if p == nil {
		return place{}, false
	}
	s := p.shard(userID)
	s.mu.RLock()
	pl, ok := s.m[placeKey{saleID, userID}]
	s.mu.RUnlock()
	return pl, ok
}

// put remembers a final place.
func (p *places) put(saleID, userID string, pl place) {
	if p == nil {
		return
	}
	s := p.shard(userID)
	s.mu.Lock()
	if len(s.m) >= p.perShard {
		clear(s.m)
	}
	s.m[placeKey{saleID, userID}] = pl
	s.mu.Unlock()
}
