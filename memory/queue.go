package memory

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

// Queue is the waiting room's shared state, in process: places in each
// sale's queue (the first call of a shopper takes the next place, every
// later call returns the same one), the entrants of a random sale's
// pre-queue or a lottery's registration, how far the queue is admitted,
// and the counters the pacer reads. Safe for concurrent use; use NewQueue,
// or LoadQueue for one a previous process saved (Save).
type Queue struct {
	bases [2]uint64 // of userKey's two hashes
	sales sync.Map  // saleID -> *saleQueue
}

// userKey is a user id as two 64-bit hashes from independent secret bases.
// A place is the one thing a shopper of a big sale leaves in the queue, so
// it is kept without the id's string: a sale of two million places is then
// a few tens of megabytes the garbage collector never scans, where string
// keys cost it a pointer to follow per shopper. Two ids sharing both hashes
// would share a place; at 128 bits that is about one chance in 10^26 for
// two million shoppers. The bases are saved with the places, so that the
// queue a restarted process loads (LoadQueue) finds each shopper's place.
type userKey [2]uint64

func (q *Queue) key(userID string) userKey {
	return userKey{fnv1a(q.bases[0], userID), fnv1a(q.bases[1], userID)}
}

// fnv1a is FNV-1a over s from basis, finished with MurmurHash3's 64-bit
// mix so that every bit of the result depends on every byte (FNV's low
// bits depend only on the inputs' low bits, and pick the shard). A secret
// basis in place of FNV's offset is what makes the two hashes of userKey
// independent of each other and unknown outside the process.
func fnv1a(basis uint64, s string) uint64 {
	const prime = 1099511628211
	h := basis
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

const queueShards = 64

type saleQueue struct {
	next     atomic.Int64
	admitted atomic.Int64
	sealed   atomic.Bool
	mu       sync.Mutex // guards entrants, counters and the seal
	entrants map[string]int64
	counters map[string]int64
	spent    map[string]int64 // id -> until (unix ms)
	suspects map[string]string
	// awaiting and invited are the shoppers who wait to be told of their
	// turn, by place and in order of redemption (waitroom.Queue.Await):
	// only sales that notify turns keep them.
	awaiting   map[int64]string
	invited    []string
	invitedSet map[string]struct{}
	shards     [queueShards]struct {
		mu     sync.Mutex
		places placeTable
		_      [64]byte // keep shards on separate cache lines
	}
}

type place struct {
	pos     int64
	arrival int64 // unix ms
}

// NewQueue returns an empty Queue.
func NewQueue() *Queue {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return &Queue{bases: [2]uint64{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])}}
}

func newSaleQueue() *saleQueue {
	sq := &saleQueue{entrants: map[string]int64{}, counters: map[string]int64{}, spent: map[string]int64{},
		suspects: map[string]string{}, awaiting: map[int64]string{}, invitedSet: map[string]struct{}{}}
	return sq
}

func (q *Queue) sale(saleID string) *saleQueue {
	if v, ok := q.sales.Load(saleID); ok {
		return v.(*saleQueue)
	}
	v, _ := q.sales.LoadOrStore(saleID, newSaleQueue())
	return v.(*saleQueue)
}

// Join returns the shopper's place (from 1) and arrival time.
func (q *Queue) Join(_ context.Context, saleID, userID string, now time.Time) (int64, time.Time, error) {
	sq := q.sale(saleID)
	k := q.key(userID)
	sh := &sq.shards[k[0]%queueShards]
	sh.mu.Lock()
	p, ok := sh.places.get(k)
	if !ok {
		p = place{pos: sq.next.Add(1), arrival: now.UnixMilli()}
		sh.places.put(k, p)
	}
	sh.mu.Unlock()
	return p.pos, time.UnixMilli(p.arrival).UTC(), nil
}

// Len returns how many places the sale's queue has given, counting the
// drawn entrants' places once sealed.
func (q *Queue) Len(_ context.Context, saleID string) (int64, error) {
	if v, ok := q.sales.Load(saleID); ok {
		return v.(*saleQueue).next.Load(), nil
	}
	return 0, nil
}

// Enter adds the shopper to the sale's entrants and returns when they first
// entered. It returns flashsale.ErrSealed once the draw has closed the entrants.
func (q *Queue) Enter(_ context.Context, saleID, userID string, now time.Time) (time.Time, error) {
	sq := q.sale(saleID)
	sq.mu.Lock()
	defer sq.mu.Unlock()
	if at, ok := sq.entrants[userID]; ok {
		return time.UnixMilli(at).UTC(), nil
	}
	if sq.sealed.Load() {
		return time.Time{}, flashsale.ErrSealed
	}
	sq.entrants[userID] = now.UnixMilli()
	return time.UnixMilli(now.UnixMilli()).UTC(), nil
}

// Entered reports whether the shopper is an entrant, and since when.
func (q *Queue) Entered(_ context.Context, saleID, userID string) (time.Time, bool, error) {
	sq := q.sale(saleID)
	sq.mu.Lock()
	defer sq.mu.Unlock()
	at, ok := sq.entrants[userID]
	if !ok {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(at).UTC(), true, nil
}

// Entrants returns the user ids of every entrant, in no order.
func (q *Queue) Entrants(_ context.Context, saleID string) ([]string, error) {
	sq := q.sale(saleID)
	sq.mu.Lock()
	defer sq.mu.Unlock()
	out := make([]string, 0, len(sq.entrants))
	for u := range sq.entrants {
		out = append(out, u)
	}
	return out, nil
}

// Seal closes the entrants for the draw and makes Join's places continue
// after them. It returns the number of entrants; sealing again returns the
// same number.
func (q *Queue) Seal(_ context.Context, saleID string) (int64, error) {
	sq := q.sale(saleID)
	sq.mu.Lock()
	defer sq.mu.Unlock()
	n := int64(len(sq.entrants))
	if !sq.sealed.Load() {
		sq.sealed.Store(true)
		for {
			cur := sq.next.Load()
			if cur >= n || sq.next.CompareAndSwap(cur, n) {
				break
			}
		}
	}
	return n, nil
}

// Admit raises the sale's admitted-up-to place to upTo if it is lower, and
// returns the place admitted up to. It never lowers it.
func (q *Queue) Admit(_ context.Context, saleID string, upTo int64) (int64, error) {
	sq := q.sale(saleID)
	for {
		cur := sq.admitted.Load()
		if upTo <= cur || sq.admitted.CompareAndSwap(cur, upTo) {
			return max(cur, upTo), nil
		}
	}
}

// Admitted returns the sale's admitted-up-to place.
func (q *Queue) Admitted(_ context.Context, saleID string) (int64, error) {
	return q.sale(saleID).admitted.Load(), nil
}

// Add adds delta to one of the sale's named counters and returns its value.
func (q *Queue) Add(_ context.Context, saleID, counter string, delta int64) (int64, error) {
	sq := q.sale(saleID)
	sq.mu.Lock()
	defer sq.mu.Unlock()
	sq.counters[counter] += delta
	return sq.counters[counter], nil
}

// Counter returns one of the sale's named counters.
func (q *Queue) Counter(_ context.Context, saleID, counter string) (int64, error) {
	sq := q.sale(saleID)
	sq.mu.Lock()
	defer sq.mu.Unlock()
	return sq.counters[counter], nil
}

// Raise raises one of the sale's named counters to to if it is lower.
func (q *Queue) Raise(_ context.Context, saleID, counter string, to int64) (int64, error) {
	sq := q.sale(saleID)
	sq.mu.Lock()
	defer sq.mu.Unlock()
	sq.counters[counter] = max(sq.counters[counter], to)
	return sq.counters[counter], nil
}

// Await notes that the shopper at position waits for its turn; a negative
// position (waitroom.Invited) notes an invited shopper.
func (q *Queue) Await(_ context.Context, saleID, userID string, position int64) error {
	sq := q.sale(saleID)
	sq.mu.Lock()
	defer sq.mu.Unlock()
	if position > 0 {
		sq.awaiting[position] = userID
		return nil
	}
	if _, ok := sq.invitedSet[userID]; !ok {
		sq.invitedSet[userID] = struct{}{}
		sq.invited = append(sq.invited, userID)
	}
	return nil
}

// Awaiting returns the shoppers noted at places from+1 to to, in order.
func (q *Queue) Awaiting(_ context.Context, saleID string, from, to int64) ([]string, error) {
	sq := q.sale(saleID)
	sq.mu.Lock()
	defer sq.mu.Unlock()
	var out []string
	for p := from + 1; p <= to; p++ {
		if u, ok := sq.awaiting[p]; ok {
			out = append(out, u)
		}
	}
	return out, nil
}

// AwaitingInvited returns the invited shoppers noted, from the index from.
func (q *Queue) AwaitingInvited(_ context.Context, saleID string, from int64) ([]string, error) {
	sq := q.sale(saleID)
	sq.mu.Lock()
	defer sq.mu.Unlock()
	if from >= int64(len(sq.invited)) {
		return nil, nil
	}
	return append([]string(nil), sq.invited[max(from, 0):]...), nil
}

// Lead reports whether holder leads the named task: in one process there
// is no one else, so it always does.
func (q *Queue) Lead(context.Context, string, string, time.Duration) (bool, error) { return true, nil }

// Spend marks id used for ttl and reports whether this call did. Expired
// marks are pruned as the set grows.
func (q *Queue) Spend(_ context.Context, saleID, id string, ttl time.Duration) (bool, error) {
	sq := q.sale(saleID)
	sq.mu.Lock()
	defer sq.mu.Unlock()
	if _, ok := sq.spent[id]; ok {
		return false, nil
	}
	// Marks past their time are pruned by the wall clock, now and then,
	// as the set grows; until then a mark holds whatever the time.
	if now := time.Now().UnixMilli(); len(sq.spent) >= 1024 && len(sq.spent)%1024 == 0 {
		for k, u := range sq.spent {
			if u <= now {
				delete(sq.spent, k)
			}
		}
	}
	sq.spent[id] = time.Now().Add(ttl).UnixMilli()
	return true, nil
}

// Spent reports whether id is marked spent.
func (q *Queue) Spent(_ context.Context, saleID, id string) (bool, error) {
	sq := q.sale(saleID)
	sq.mu.Lock()
	defer sq.mu.Unlock()
	_, ok := sq.spent[id]
	return ok, nil
}

// Flag holds a shopper suspected of automation, keeping the first reason.
func (q *Queue) Flag(_ context.Context, saleID, userID, reason string) error {
	sq := q.sale(saleID)
	sq.mu.Lock()
	defer sq.mu.Unlock()
	if _, ok := sq.suspects[userID]; !ok {
		sq.suspects[userID] = reason
	}
	return nil
}

// Suspects returns the held shoppers and why.
func (q *Queue) Suspects(_ context.Context, saleID string) (map[string]string, error) {
	sq := q.sale(saleID)
	sq.mu.Lock()
	defer sq.mu.Unlock()
	out := make(map[string]string, len(sq.suspects))
	for u, r := range sq.suspects {
		out[u] = r
	}
	return out, nil
}

// Forget drops the sale's places, entrants and counters, keeping its
// suspects (cleared in place, under their locks, so Flag and Suspects may
// run beside it). A Join racing with it may see part of the old queue:
// the sale is closed by then, so none comes.
func (q *Queue) Forget(_ context.Context, saleID string) error {
	v, ok := q.sales.Load(saleID)
	if !ok {
		return nil
	}
	sq := v.(*saleQueue)
	sq.mu.Lock()
	defer sq.mu.Unlock()
	for i := range sq.shards {
		sh := &sq.shards[i]
		sh.mu.Lock()
		sh.places = placeTable{}
		sh.mu.Unlock()
	}
	sq.entrants, sq.counters, sq.spent = map[string]int64{}, map[string]int64{}, map[string]int64{}
	sq.awaiting, sq.invited, sq.invitedSet = map[int64]string{}, nil, map[string]struct{}{}
	sq.next.Store(0)
	sq.admitted.Store(0)
	sq.sealed.Store(false)
	return nil
}
