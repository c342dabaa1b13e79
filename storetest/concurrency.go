package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

// A shopper firing fifty parallel requests (each with its own reservation
// id) is recorded at most once.
func testConcurrentSameUser(e *env) {
	t := e.t
	s := e.sale()
	const n = 50
	var (
		start sync.WaitGroup
		wg    sync.WaitGroup
		won   atomic.Int64
		gate  = make(chan struct{})
	)
	start.Add(n)
	for range n {
		wg.Go(func() {
			r := newHold(s, "u-eager")
			start.Done()
			<-gate
			err := e.store.CreateReservation(e.ctx, r)
			switch {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, flashsale.ErrDuplicate):
				t.Errorf("CreateReservation: %v, want nil or ErrDuplicate", err)
			}
		})
	}
	start.Wait()
	close(gate)
	wg.Wait()
	if won.Load() != 1 {
		t.Errorf("%d of %d parallel holds of one shopper were recorded, want exactly 1", won.Load(), n)
	}
	totals, err := totalsOf(e, s.ID)
	ok(t, "SaleTotals", err)
	same(t, "SaleTotals", totals, flashsale.SaleTotals{Pending: 1})
}

// Five sweepers over 200 due holds: each hold is returned exactly once, and
// no call returns more than its limit.
func testConcurrentExpireDue(e *env) {
	t := e.t
	s := e.sale()
	const (
		holds   = 200
		workers = 5
		limit   = 7
	)
	for i := range holds {
		e.hold(s, fmt.Sprintf("u-%d", i), func(r *flashsale.Reservation) {
			r.ExpiresAt = t0.Add(time.Duration(1+i%13) * time.Second)
		})
	}
	now := t0.Add(time.Minute)
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
		gate = make(chan struct{})
	)
	for range workers {
		wg.Go(func() {
			<-gate
			for {
				due, err := e.store.ExpireDue(e.ctx, now, limit)
				if err != nil {
					t.Errorf("ExpireDue: %v", err)
					return
				}
				if len(due) > limit {
					t.Errorf("ExpireDue(limit %d) returned %d holds", limit, len(due))
				}
				if len(due) == 0 {
					return
				}
				mu.Lock()
				for _, r := range due {
					seen[r.ID]++
					if r.State != flashsale.ReservationExpired || !r.RestockedAt.Equal(now) {
						t.Errorf("ExpireDue returned %s %s restocked at %v", r.ID, r.State, r.RestockedAt)
					}
				}
				mu.Unlock()
			}
		})
	}
	close(gate)
	wg.Wait()

	if len(seen) != holds {
		t.Errorf("the sweepers returned %d distinct holds, want %d", len(seen), holds)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("hold %s was returned %d times: its units would go back %d times", id, n, n)
		}
	}
	rest, err := e.store.ExpireDue(e.ctx, now, holds)
	ok(t, "ExpireDue after the sweepers", err)
	if len(rest) != 0 {
		t.Errorf("ExpireDue after the sweepers = %d holds, want none", len(rest))
	}
	totals, err := totalsOf(e, s.ID)
	ok(t, "SaleTotals", err)
	same(t, "SaleTotals", totals, flashsale.SaleTotals{Expired: holds})
}

// A shopper's confirm racing their own cancel: exactly one of them wins,
// and the loser says who did.
func testConcurrentConfirmCancel(e *env) {
	t := e.t
	s := e.sale()
	const rounds = 20
	confirms := 0
	for i := range rounds {
		r := e.hold(s, fmt.Sprintf("u-%d", i))
		var (
			wg         sync.WaitGroup
			gate       = make(chan struct{})
			ord        *flashsale.Order
			confirmErr error
			restocked  bool
			cancelErr  error
		)
		wg.Go(func() {
			<-gate
			_, ord, confirmErr = e.store.ConfirmReservation(e.ctx, r.ID, r.UserID, "pay", t0.Add(time.Minute))
		})
		wg.Go(func() {
			<-gate
			_, restocked, cancelErr = e.store.CancelReservation(e.ctx, r.ID, r.UserID, t0.Add(time.Minute))
		})
		close(gate)
		wg.Wait()

		got := e.reservation(r.ID)
		switch {
		case confirmErr == nil && cancelErr != nil:
			confirms++
			wantCode(t, "the losing cancel", cancelErr, flashsale.CodeReservationConfirmed)
			if restocked || ord == nil || got.State != flashsale.ReservationConfirmed || got.OrderID != ord.ID {
				t.Errorf("round %d, confirm won: restocked %v, order %v, hold %+v", i, restocked, ord, got)
			}
		case cancelErr == nil && confirmErr != nil:
			wantCode(t, "the losing confirm", confirmErr, flashsale.CodeReservationCancelled)
			if !restocked || got.State != flashsale.ReservationCancelled || got.OrderID != "" {
				t.Errorf("round %d, cancel won: restocked %v, hold %+v", i, restocked, got)
			}
		default:
			t.Errorf("round %d: confirm %v, cancel (restocked %v) %v; want exactly one to win", i, confirmErr, restocked, cancelErr)
		}
	}
	orders, err := e.store.Orders(e.ctx, s.ID)
	ok(t, "Orders", err)
	if len(orders) != confirms {
		t.Errorf("%d orders for %d winning confirms", len(orders), confirms)
	}
}

// Sweepers and shoppers' cancels racing over the same due holds: every
// hold is restocked exactly once, by one of them.
func testConcurrentRestockOnce(e *env) {
	t := e.t
	s := e.sale()
	const holds = 100
	var all []*flashsale.Reservation
	for i := range holds {
		all = append(all, e.hold(s, fmt.Sprintf("u-%d", i)))
	}
	now := t0.Add(time.Hour) // every hold is due
	var (
		mu        sync.Mutex
		restocks  = map[string]int{}
		wg        sync.WaitGroup
		gate      = make(chan struct{})
		restocked = func(id string) {
			mu.Lock()
			restocks[id]++
			mu.Unlock()
		}
	)
	for range 3 {
		wg.Go(func() {
			<-gate
			for {
				due, err := e.store.ExpireDue(e.ctx, now, 5)
				if err != nil {
					t.Errorf("ExpireDue: %v", err)
					return
				}
				if len(due) == 0 {
					return
				}
				for _, r := range due {
					restocked(r.ID)
				}
			}
		})
	}
	wg.Go(func() {
		<-gate
		for i := len(all) - 1; i >= 0; i-- { // from the far end of the sweepers' order
			r := all[i]
			_, did, err := e.store.CancelReservation(e.ctx, r.ID, r.UserID, now)
			switch {
			case err == nil && did:
				restocked(r.ID)
			case err == nil:
				t.Errorf("CancelReservation(%s) found it cancelled: nobody else cancels", r.ID)
			case flashsale.ErrorCode(err) != flashsale.CodeReservationExpired:
				t.Errorf("CancelReservation(%s): %v, want nil or reservation_expired", r.ID, err)
			}
		}
	})
	close(gate)
	wg.Wait()

	for _, r := range all {
		if n := restocks[r.ID]; n != 1 {
			t.Errorf("hold %s was restocked %d times, want exactly once", r.ID, n)
		}
	}
	totals, err := totalsOf(e, s.ID)
	ok(t, "SaleTotals", err)
	if totals.Pending != 0 || totals.Expired+totals.Cancelled != holds {
		t.Errorf("SaleTotals = %+v, want %d expired or cancelled", totals, holds)
	}
}

// Reserves under the old epoch racing a rebuild: every reserve the record
// accepted is in the rebuild's holds, and every other one was refused with
// ErrStaleEpoch, so the rebuilt gate misses no hold and counts none twice.
func testConcurrentRebuild(e *env) {
	t := e.t
	s := e.sale()
	const (
		workers     = 8
		beforeStart = 20    // accepted reserves before the rebuild starts
		maxTries    = 2_000 // a bound, should the rebuild never come
	)
	var (
		mu       sync.Mutex
		accepted = map[string]bool{}
		count    atomic.Int64
		ready    = make(chan struct{})
		stop     = make(chan struct{})
		once     sync.Once
		wg       sync.WaitGroup
		next     atomic.Int64
	)
	for range workers {
		wg.Go(func() {
			for range maxTries {
				select {
				case <-stop:
					return
				default:
				}
				r := newHold(s, fmt.Sprintf("u-%d", next.Add(1)))
				err := e.store.CreateReservation(e.ctx, r)
				if err != nil {
					if !errors.Is(err, flashsale.ErrStaleEpoch) {
						t.Errorf("CreateReservation: %v, want nil or ErrStaleEpoch", err)
					}
					return // every later try is at the same stale epoch
				}
				mu.Lock()
				accepted[r.ID] = true
				mu.Unlock()
				if count.Add(1) == beforeStart {
					once.Do(func() { close(ready) })
				}
			}
			t.Errorf("CreateReservation never saw the rebuild")
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-ready:
	case <-done:
		t.Fatalf("the reserves stopped before the rebuild, after %d were accepted", count.Load())
	}
	epoch, holds, err := e.store.BeginRebuild(e.ctx, s.ID, t0)
	if err != nil {
		close(stop)
		<-done
		t.Fatalf("BeginRebuild: %v", err)
	}
	<-done

	if epoch != 2 {
		t.Errorf("BeginRebuild epoch = %d, want 2", epoch)
	}
	got := map[string]bool{}
	for _, h := range holds {
		if got[h.ReservationID] {
			t.Errorf("BeginRebuild returned %s twice", h.ReservationID)
		}
		got[h.ReservationID] = true
		if !accepted[h.ReservationID] {
			t.Errorf("BeginRebuild returned %s, which the record refused", h.ReservationID)
		}
	}
	for id := range accepted {
		if !got[id] {
			t.Errorf("reservation %s was accepted but is missing from the rebuild: the gate would sell its units again", id)
		}
	}
	if len(accepted) < beforeStart {
		t.Errorf("only %d reserves were accepted", len(accepted))
	}
}
