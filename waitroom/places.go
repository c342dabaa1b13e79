package waitroom

import (
	"hash/maphash"
	"sync"
	"time"
)

// places remembers the places the queue has given, so that a shopper who
// asks again (the crowd's refresh, the commonest request of a sale) is
// answered from memory instead of with a round trip to the shared queue.
// The ticket is signed again from the remembered place: a token is
// deterministic (the same place signs to the same bytes under the same
// key), and a signature costs about a microsecond where keeping the signed
// string cost more than a hundred bytes a shopper for the garbage collector
// to scan.
//
// It can, because a place never changes once given: the contract's
// "asking again never returns a better place", and the queue's Join
// returns the same place on every call. Only final places are kept: real
// places, and NotSelected once the draw has run; a place still pending a
// draw is asked again. Several edges each keep their own; all learnt from
// one queue, they agree.
//
// A place is kept under the (sale, shopper) pair's two 64-bit hashes of
// independent seeds, with nothing the collector follows: two pairs sharing
// both would share a place, about one chance in 10^26 for two million
// shoppers.
//
// It is bounded: a shard that fills up is emptied, and the places in it
// are learnt again from the queue on their next ask. Safe for concurrent
// use.
type places struct {
	seeds    [2]maphash.Seed
	perShard int
	shards   [placeShards]placeShard
}

const placeShards = 64

type placeKey [2]uint64

// place is a shopper's place in a sale's queue and when it was taken.
type place struct {
	position int64
	arrival  int64 // Unix milliseconds, as tickets carry it
}

func (p place) arrivalTime() time.Time { return time.UnixMilli(p.arrival).UTC() }

type placeShard struct {
	mu sync.RWMutex
	m  map[placeKey]place
	_  [40]byte // a cache line of its own
}

// newPlaces returns a cache of about capacity places; nil (no cache) when
// capacity is negative.
func newPlaces(capacity int) *places {
	if capacity < 0 {
		return nil
	}
	p := &places{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		perShard: max(1, capacity/placeShards)}
	for i := range p.shards {
		p.shards[i].m = map[placeKey]place{}
	}
	return p
}

func (p *places) key(saleID, userID string) placeKey {
	var k placeKey
	for i, seed := range p.seeds {
		var h maphash.Hash
		h.SetSeed(seed)
		h.WriteString(saleID)
		h.WriteByte(0)
		h.WriteString(userID)
		k[i] = h.Sum64()
	}
	return k
}

// get returns the shopper's remembered place in the sale.
func (p *places) get(saleID, userID string) (place, bool) {
	if p == nil {
		return place{}, false
	}
	k := p.key(saleID, userID)
	s := &p.shards[k[0]%placeShards]
	s.mu.RLock()
	pl, ok := s.m[k]
	s.mu.RUnlock()
	return pl, ok
}

// put remembers a final place.
func (p *places) put(saleID, userID string, pl place) {
	if p == nil {
		return
	}
	k := p.key(saleID, userID)
	s := &p.shards[k[0]%placeShards]
	s.mu.Lock()
	if len(s.m) >= p.perShard {
		clear(s.m)
	}
	s.m[k] = pl
	s.mu.Unlock()
}
