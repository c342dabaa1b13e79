// Package bulkhead bounds the requests the purchase path has in flight, in
// total and per sale, so that a flash sale at full tilt cannot queue without
// bound for the record's connections, and one sale cannot take every slot
// from another.
//
// A request that finds no slot within a short wait is shed: the caller
// answers 503 overloaded with Retry-After before doing any work (no
// idempotency key stored, no gate call), so the client can repeat it with
// the same Idempotency-Key and nothing is lost. Shedding at once is the
// point: a queue without a bound is how a sale's slowness becomes every
// shopper's timeout, and then the store's outage.
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
	// Wait is the longest a request waits for a slot before it is shed;
	// zero or less sheds at once. At most Max requests wait at a time:
	// beyond them, a request is shed at once too.
	Wait time.Duration
}

// Bulkhead hands out slots. Safe for concurrent use; its zero value is not
// usable, call New.
type Bulkhead struct {
	cfg Config

	mu       sync.Mutex
	inFlight int
	byKey    map[string]int
	// waiting is in arrival order: a freed slot goes to the first waiter
	// whose key still has room.
	waiting []*waiter

	shed atomic.Int64
	// queued, when set (tests), is called with the key of a request that
	// starts waiting for a slot.
	queued func(key string)
}

type waiter struct {
	key string
	// granted is closed once the slot is the waiter's.
	granted chan struct{}
}

// New returns a Bulkhead sized by cfg. Max below 1 is taken as 1.
func New(cfg Config) *Bulkhead {
	cfg.Max = max(cfg.Max, 1)
	if cfg.PerKey <= 0 {
		cfg.PerKey = max(cfg.Max/2, 1)
	}
	cfg.PerKey = min(cfg.PerKey, cfg.Max)
	return &Bulkhead{cfg: cfg, byKey: make(map[string]int)}
}

// Config returns the bulkhead's sizes, defaults applied.
func (b *Bulkhead) Config() Config { return b.cfg }

// Acquire takes a slot for key, waiting at most Config.Wait (or until ctx
// ends) for one. It returns the function that gives the slot back, to be
// called once the request's work is done (calling it again does nothing),
// and true; or nil and false when the request is shed.
func (b *Bulkhead) Acquire(ctx context.Context, key string) (release func(), ok bool) {
	b.mu.Lock()
	if b.fits(key) {
		b.take(key)
		b.mu.Unlock()
		return b.releaser(key), true
	}
	if b.cfg.Wait <= 0 || len(b.waiting) >= b.cfg.Max {
		b.mu.Unlock()
		b.shed.Add(1)
		return nil, false
	}
	w := &waiter{key: key, granted: make(chan struct{})}
	b.waiting = append(b.waiting, w)
	queued := b.queued
	b.mu.Unlock()
	if queued != nil {
		queued(key)
	}

	timer := time.NewTimer(b.cfg.Wait)
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
	for i, other := range b.waiting {
		if other == w {
			b.waiting = append(b.waiting[:i], b.waiting[i+1:]...)
			break
		}
	}
	b.shed.Add(1)
	return nil, false
}

// fits reports whether a request for key may take a slot now. b.mu held.
func (b *Bulkhead) fits(key string) bool {
	return b.inFlight < b.cfg.Max && b.byKey[key] < b.cfg.PerKey
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
	b.inFlight--
	if b.byKey[key]--; b.byKey[key] <= 0 {
		delete(b.byKey, key)
	}
	kept := b.waiting[:0]
	for _, w := range b.waiting {
		if b.fits(w.key) {
			b.take(w.key)
			close(w.granted)
			continue
		}
		kept = append(kept, w)
	}
	clear(b.waiting[len(kept):])
	b.waiting = kept
}

// InFlight returns how many slots are taken now.
func (b *Bulkhead) InFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight
}

// InFlightOf returns how many slots key holds now.
func (b *Bulkhead) InFlightOf(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byKey[key]
}

// Shed returns how many requests have been shed since New.
func (b *Bulkhead) Shed() int64 { return b.shed.Load() }
