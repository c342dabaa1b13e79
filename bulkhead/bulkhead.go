// Package bulkhead bounds the requests the purchase path has in flight, in
// total and per sale, so that a flash sale at full tilt cannot queue without
// bound for the record's connections, and one sale cannot take every slot
// from another.
//
// A request that finds no slot within a short wait is shed (a few keys,
// such as a winner's payment, may be given a longer one): the caller
// answers 503 overloaded with Retry-After before doing any work (no
// idempotency key stored, no gate call), so the client can repeat it with
// the same Idempotency-Key and nothing is lost. Shedding at once is the
// point: a queue without a bound is how a sale's slowness becomes every
// shopper's timeout, and then the store's outage.
//
// Overselling is neither prevented nor caused here: a shed request has done
// nothing. The gate (packages memory and redis) counts the stock.
package bulkhead

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Config sizes a Bulkhead.
type Config struct {
	// Max is how many requests may be in flight at once; at least 1.
	Max int
	// PerKey is how many of them one key (a sale) may hold at once. Zero
	// means half of Max, at least 1; it is never more than Max.
	PerKey int
	// Shares names keys that may hold another number than PerKey (at
	// least 1, at most Max), such as a key several sales share.
	Shares map[string]int
	// Wait is the longest a request waits for a slot before it is shed;
	// zero or less sheds at once.
	Wait time.Duration
	// MaxWaiting is how many requests may wait for a slot at once: beyond
	// them, a request is shed at once too. Zero means Max.
	MaxWaiting int
	// KeyWaiting, when above zero, is how many requests of one key may wait
	// at once (a patient key's Patience.MaxWaiting aside): beyond them, the
	// key's next request is shed at once, so that one key (an account) can
	// neither fill the line nor keep its requests parked for long.
	KeyWaiting int
	// Patient names keys whose requests wait by a Patience of their own
	// instead of Wait and MaxWaiting: few requests that matter more than
	// the crowd's, such as a winner's payment, which should neither be
	// shed after the crowd's short wait nor find the line full of the
	// crowd's waiters. Their waiters do not count towards MaxWaiting.
	Patient map[string]Patience
}

// Patience is how a patient key's requests wait: for up to Wait (zero or
// less sheds at once), at most MaxWaiting of them at once (zero means Max).
type Patience struct {
	Wait       time.Duration
	MaxWaiting int
}

// Bulkhead hands out slots. Safe for concurrent use; its zero value is not
// usable, call New.
type Bulkhead struct {
	cfg Config

	mu       sync.Mutex
	inFlight int
	byKey    map[string]int
	// queues holds each key's waiters in arrival order, only for keys that
	// have some: a freed slot goes to the oldest waiter whose key has room,
	// found among the queues' heads, so giving a slot back costs the
	// number of keys waiting, not the number of waiters.
	queues map[string]*queue
	// waiting counts the waiters still waiting, across the queues;
	// patientWaiting those of them whose key is patient.
	waiting, patientWaiting int
	// seq numbers waiters in arrival order.
	seq uint64

	shed atomic.Int64
	// queued, when set (tests), is called with the key of a request that
	// starts waiting for a slot.
	queued func(key string)
}

type waiter struct {
	key string
	seq uint64
	// granted is closed once the slot is the waiter's.
	granted chan struct{}
	// gone is set, under Bulkhead.mu, by a waiter that gave up; its queue
	// drops it when it comes to the head, or when the gone outnumber the
	// rest.
	gone bool
}

// queue is one key's waiters, oldest first, some of them perhaps gone.
type queue struct {
	waiters []*waiter
	gone    int
}

// head returns the oldest waiter still waiting, dropping the gone ahead of
// it, or nil.
func (q *queue) head() *waiter {
	for len(q.waiters) > 0 {
		w := q.waiters[0]
		if !w.gone {
			return w
		}
		q.waiters[0] = nil
		q.waiters = q.waiters[1:]
		q.gone--
	}
	return nil
}

// New returns a Bulkhead sized by cfg. Max below 1 is taken as 1.
func New(cfg Config) *Bulkhead {
	cfg.Max = max(cfg.Max, 1)
	if cfg.PerKey <= 0 {
		cfg.PerKey = max(cfg.Max/2, 1)
	}
	cfg.PerKey = min(cfg.PerKey, cfg.Max)
	shares := make(map[string]int, len(cfg.Shares))
	for key, n := range cfg.Shares {
		shares[key] = min(max(n, 1), cfg.Max)
	}
	cfg.Shares = shares
	if cfg.MaxWaiting <= 0 {
		cfg.MaxWaiting = cfg.Max
	}
	patient := make(map[string]Patience, len(cfg.Patient))
	for key, p := range cfg.Patient {
		if p.MaxWaiting <= 0 {
			p.MaxWaiting = cfg.Max
		}
		patient[key] = p
	}
	cfg.Patient = patient
	return &Bulkhead{cfg: cfg, byKey: make(map[string]int), queues: make(map[string]*queue)}
}

// Config returns the bulkhead's sizes, defaults applied.
func (b *Bulkhead) Config() Config { return b.cfg }

// Share returns how many slots key may hold at once.
func (b *Bulkhead) Share(key string) int {
	if n, ok := b.cfg.Shares[key]; ok {
		return n
	}
	return b.cfg.PerKey
}

// Acquire takes a slot for key, waiting at most Config.Wait (a patient
// key's own Wait), or until ctx ends, for one. It returns the function
// that gives the slot back, to be called once the request's work is done
// (calling it again does nothing), and true; or nil and false when the
// request is shed.
func (b *Bulkhead) Acquire(ctx context.Context, key string) (release func(), ok bool) {
	b.mu.Lock()
	if b.fits(key) {
		b.take(key)
		b.mu.Unlock()
		return b.releaser(key), true
	}
	q := b.queues[key]
	wait, full := b.cfg.Wait, b.waiting-b.patientWaiting >= b.cfg.MaxWaiting
	p, patient := b.cfg.Patient[key]
	if patient {
		wait, full = p.Wait, q != nil && len(q.waiters)-q.gone >= p.MaxWaiting
	} else if b.cfg.KeyWaiting > 0 && q != nil && len(q.waiters)-q.gone >= b.cfg.KeyWaiting {
		full = true
	}
	if wait <= 0 || full {
		b.mu.Unlock()
		b.shed.Add(1)
		return nil, false
	}
	b.seq++
	w := &waiter{key: key, seq: b.seq, granted: make(chan struct{})}
	if q == nil {
		q = &queue{}
		b.queues[key] = q
	}
	q.waiters = append(q.waiters, w)
	b.waited(key, 1)
	queued := b.queued
	b.mu.Unlock()
	if queued != nil {
		queued(key)
	}

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.granted:
		return b.releaser(key), true
	case <-timer.C:
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.granted:
		// Granted while giving up: the slot is ours all the same.
		return b.releaser(key), true
	default:
	}
	b.leave(w)
	b.shed.Add(1)
	return nil, false
}

// leave takes w, which gave up, out of its key's waiters. b.mu held.
func (b *Bulkhead) leave(w *waiter) {
	w.gone = true
	b.waited(w.key, -1)
	q := b.queues[w.key]
	q.gone++
	if q.head() == nil {
		delete(b.queues, w.key)
		return
	}
	if q.gone > len(q.waiters)/2 {
		kept := q.waiters[:0]
		for _, other := range q.waiters {
			if !other.gone {
				kept = append(kept, other)
			}
		}
		clear(q.waiters[len(kept):])
		q.waiters, q.gone = kept, 0
	}
}

// waited counts n more (or fewer) waiters of key. b.mu held.
func (b *Bulkhead) waited(key string, n int) {
	b.waiting += n
	if _, ok := b.cfg.Patient[key]; ok {
		b.patientWaiting += n
	}
}

// fits reports whether a request for key may take a slot now. b.mu held.
func (b *Bulkhead) fits(key string) bool {
	return b.inFlight < b.cfg.Max && b.byKey[key] < b.Share(key)
}

// take counts a slot as key's. b.mu held.
func (b *Bulkhead) take(key string) {
	b.inFlight++
	b.byKey[key]++
}

func (b *Bulkhead) releaser(key string) func() {
	var done atomic.Bool
	return func() {
		if done.Swap(true) {
			return
		}
		b.release(key)
	}
}

// release gives key's slot back and hands freed slots to waiters, first
// come first served among those whose key has room.
func (b *Bulkhead) release(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	wasFull := b.inFlight >= b.cfg.Max
	b.inFlight--
	if b.byKey[key]--; b.byKey[key] <= 0 {
		delete(b.byKey, key)
	}
	if !wasFull {
		// The total had room, so every waiter waits for its own key's
		// share, and only key's share has changed: its oldest waiter, if
		// any, is the one to go. This keeps a release O(1) however many
		// keys wait (a bulkhead of many keys and no real total, such as
		// one per account, would otherwise look at each of them).
		if q := b.queues[key]; q != nil {
			if w := q.head(); w != nil && b.fits(key) {
				b.grant(q, w)
			} else if w == nil {
				delete(b.queues, key)
			}
		}
		return
	}
	for b.inFlight < b.cfg.Max {
		var next *waiter
		for k, q := range b.queues {
			w := q.head()
			if w == nil {
				delete(b.queues, k)
				continue
			}
			if b.byKey[k] < b.Share(k) && (next == nil || w.seq < next.seq) {
				next = w
			}
		}
		if next == nil {
			return
		}
		b.grant(b.queues[next.key], next)
	}
}

// grant gives w, the head of its key's queue q, a slot. b.mu held.
func (b *Bulkhead) grant(q *queue, w *waiter) {
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
	if q.head() == nil {
		delete(b.queues, w.key)
	}
	b.waited(w.key, -1)
	b.take(w.key)
	close(w.granted)
}

// InFlight returns how many slots are taken now.
func (b *Bulkhead) InFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight
}

// Waiting returns how many requests wait for a slot now.
func (b *Bulkhead) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting
}

// InFlightOf returns how many slots key holds now.
func (b *Bulkhead) InFlightOf(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byKey[key]
}

// Shed returns how many requests have been shed since New.
func (b *Bulkhead) Shed() int64 { return b.shed.Load() }
