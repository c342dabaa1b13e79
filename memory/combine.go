package memory

import (
	"math/bits"
	"runtime"
	"sync/atomic"

	"github.com/flashsale/flashsale"
)

// Combining. On two cores a win costs more than on one (about 530 against
// 370 ns in BenchmarkReserveWin), because the sale's lock and every line
// the locked step writes (the counter, the tables' slots, the slab, the
// audit ring) move to whichever core takes the lock next. So a reserve
// that finds the lock taken does not queue for it: it leaves its request
// in one of the sale's slots, and whoever holds the lock decides it along
// with its own, on the core where those lines already are, and hands back
// the answer. Each decision is still one step under the lock, in the order
// of flashsale.Verdict; only who runs it changes.
//
// A waiting reserve keeps trying the lock itself, so a request is never
// left behind by a holder that missed it (one that took the lock for
// Restock, say, which decides no reserves): it decides its own request,
// and any others waiting, the moment it gets the lock.

// combineSlots is how many reserves of a sale may wait to be decided by
// the lock's holder; past that a reserve queues for the lock as before.
const combineSlots = 64

// decision is what decideLocked found, without the hold it copies: the
// caller has its own copy of a new hold.
type decision struct {
	verdict   flashsale.Verdict
	remaining int64
	epoch     int64
	// prev is the hold a replay answers with.
	prev *flashsale.Hold
	// duplicate: the reservation id already holds units (an error).
	duplicate bool
	// retry: the sale was dropped; look it up again.
	retry bool
}

// outcome is the answer d stands for; own is the hold the reserve made.
func (d *decision) outcome(own *flashsale.Hold) (flashsale.GateOutcome, error) {
	if d.duplicate {
		return flashsale.GateOutcome{}, errDuplicate(own.ReservationID)
	}
	out := flashsale.GateOutcome{Verdict: d.verdict, Remaining: d.remaining, Epoch: d.epoch}
	switch d.verdict {
	case flashsale.VerdictWon:
		out.Hold = *own
	case flashsale.VerdictReplayed:
		out.Hold = *d.prev
	}
	return out, nil
}

// waiting is one reserve left for the lock's holder to decide.
type waiting struct {
	hold  flashsale.Hold
	epoch int64
	hs    hashes
	d     decision
	// done is set, after d, by whoever decided the request.
	done atomic.Bool
}

// combiner is a sale's slots of waiting reserves.
type combiner struct {
	// taken has bit i set while slots[i] belongs to a reserve; waiting
	// has it set from the moment the request is in the slot until the
	// holder takes it up. They share a line: a reserve writes both.
	taken, pending atomic.Uint64
	_              [48]byte // keep them off the slots' lines
	slots          [combineSlots]waiting
}

// Spins of a waiting reserve before it yields its processor, and yields
// before it blocks on the lock: a holder descheduled by the host must not
// keep its waiters spinning.
const (
	combineSpins  = 64
	combineYields = 16
)

// decide decides the reserve of hold h at epoch, hashes hs, under the
// sale's lock, by this goroutine or by the lock's holder.
func (s *sale) decide(h *flashsale.Hold, epoch int64, hs *hashes) decision {
	if s.mu.TryLock() {
		d := s.decideLocked(h, epoch, hs)
		s.combineLocked()
		s.mu.Unlock()
		return d
	}
	i, ok := s.comb.claim()
	if !ok {
		s.mu.Lock()
		d := s.decideLocked(h, epoch, hs)
		s.combineLocked()
		s.mu.Unlock()
		return d
	}
	w := &s.comb.slots[i]
	w.hold, w.epoch, w.hs = *h, epoch, *hs
	w.done.Store(false)
	s.comb.pending.Or(1 << i)
	for n := 0; !w.done.Load(); n++ {
		switch {
		case s.mu.TryLock():
			// This decides w too: it is pending until someone decides it.
		case n < combineSpins:
			continue
		case n < combineSpins+combineYields:
			runtime.Gosched()
			continue
		default:
			s.mu.Lock()
		}
		s.combineLocked()
		s.mu.Unlock()
	}
	d := w.d
	// Drop the strings the slot holds before giving it back, so a quiet
	// sale does not keep its last shoppers' ids alive.
	w.hold = flashsale.Hold{}
	s.comb.release(i)
	return d
}

// combineLocked decides every waiting reserve, until none is left. The
// caller holds mu.
func (s *sale) combineLocked() {
	for {
		p := s.comb.pending.Swap(0)
		if p == 0 {
			return
		}
		for ; p != 0; p &= p - 1 {
			w := &s.comb.slots[bits.TrailingZeros64(p)]
			w.d = s.decideLocked(&w.hold, w.epoch, &w.hs)
			w.done.Store(true)
		}
	}
}

// claim takes a free slot; ok is false if there is none.
func (c *combiner) claim() (i int, ok bool) {
	for {
		t := c.taken.Load()
		if t == ^uint64(0) {
			return 0, false
		}
		bit := ^t & (t + 1) // the lowest clear bit
		if c.taken.CompareAndSwap(t, t|bit) {
			return bits.TrailingZeros64(bit), true
		}
	}
}

func (c *combiner) release(i int) { c.taken.And(^(uint64(1) << i)) }
