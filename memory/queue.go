package memory

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Queue hands out places in each sale's waiting-room queue, in process: the
// first call of a shopper takes the next place, every later call returns
// the same one. Safe for concurrent use; the zero value is not usable, call
// NewQueue.
type Queue struct {
	seed  maphash.Seed
	sales sync.Map // saleID -> *saleQueue
}

const queueShards = 64

type saleQueue struct {
	next   atomic.Int64
	shards [queueShards]struct {
		mu     sync.Mutex
		places map[string]place
		_      [40]byte // keep shards on separate cache lines
	}
}

type place struct {
	pos     int64
	arrival int64 // unix ms
}

// NewQueue returns an empty Queue.
func NewQueue() *Queue { return &Queue{seed: maphash.MakeSeed()} }

func (q *Queue) sale(saleID string) *saleQueue {
	if v, ok := q.sales.Load(saleID); ok {
		return v.(*saleQueue)
	}
	sq := &saleQueue{}
	for i := range sq.shards {
		sq.shards[i].places = make(map[string]place)
	}
	v, _ := q.sales.LoadOrStore(saleID, sq)
	return v.(*saleQueue)
}

// Join returns the shopper's place (from 1) and arrival time.
func (q *Queue) Join(_ context.Context, saleID, userID string, now time.Time) (int64, time.Time, error) {
	sq := q.sale(saleID)
	sh := &sq.shards[maphash.String(q.seed, userID)%queueShards]
	sh.mu.Lock()
	p, ok := sh.places[userID]
	if !ok {
		p = place{pos: sq.next.Add(1), arrival: now.UnixMilli()}
		sh.places[userID] = p
	}
	sh.mu.Unlock()
	return p.pos, time.UnixMilli(p.arrival).UTC(), nil
}

// Len returns how many places the sale's queue has given.
func (q *Queue) Len(_ context.Context, saleID string) (int64, error) {
	if v, ok := q.sales.Load(saleID); ok {
		return v.(*saleQueue).next.Load(), nil
	}
	return 0, nil
}

// DropQueue forgets a sale's queue.
func (q *Queue) DropQueue(saleID string) { q.sales.Delete(saleID) }
