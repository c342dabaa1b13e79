package faults_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/restock"
	"github.com/flashsale/flashsale/sweeper"
)

var errKilled = errors.New("sweeper killed (fault drill)")

// killingGate is the gate as one sweeper incarnation sees it: at random
// restocks the incarnation dies, either before the gate hears of the
// restock (the record has claimed the hold, the gate still keeps it) or
// just after (the gate gave the units back, the sweeper never learned).
// It is used by one incarnation, from one goroutine.
type killingGate struct {
	restock.Gate
	rng    *rand.Rand
	kill   context.CancelFunc
	killed *atomic.Int64
}

func (g *killingGate) Restock(ctx context.Context, saleID, id, source string) (bool, error) {
	switch g.rng.IntN(12) {
	case 0:
		g.killed.Add(1)
		g.kill()
		return false, errKilled
	case 1:
		_, _ = g.Gate.Restock(ctx, saleID, id, source)
		g.killed.Add(1)
		g.kill()
		return false, errKilled
	}
	return g.Gate.Restock(ctx, saleID, id, source)
}

// TestSweepers: holds expire under load while several sweepers run at
// once against the same record and gate (two; then five, each killed at
// random points and started again), time moving on the test's clock, the
// invariant checked continuously. Every expired or cancelled hold comes
// back exactly once (the audit log shows one give-back per hold), the
// invariant never fails, and the totals are exact.
func TestSweepers(t *testing.T) {
	needFaults(t)
	for _, tc := range []struct {
		fault    string
		sweepers int
		kill     bool
	}{
		{"4a two sweepers at once, under load", 2, false},
		{"4b five sweepers killed at random points", 5, true},
	} {
		t.Run(fmt.Sprint(tc.sweepers), func(t *testing.T) {
			clock := testenv.NewClock(time.Now().UTC().Truncate(time.Millisecond))
			// The gate whole, with its give-back, which only package
			// restock is handed: each sweeper incarnation gets one.
			var whole restock.Gate
			r := newRig(t, rigConfig{clock: clock, tweak: func(c *engine.Config) {
				c.WrapGate = func(g restock.Gate) restock.Gate { whole = g; return g }
			}})
			const sku = "ticket"
			r.createSale(sku, stock, map[string]any{"holdSeconds": 2})
			ctx, cancel := context.WithTimeout(context.Background(), within)
			defer cancel()
			background, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			var killed atomic.Int64
			var checks atomic.Int64
			wg.Add(2)
			go func() { // time moves: a hold lasts about 100ms of the drill
				defer wg.Done()
				for background.Err() == nil {
					clock.Advance(200 * time.Millisecond)
					time.Sleep(10 * time.Millisecond)
				}
			}()
			go func() { // the invariant, checked continuously
				defer wg.Done()
				for background.Err() == nil {
					if err := r.eng.Watcher.CheckAll(background); err != nil && background.Err() == nil {
						t.Errorf("invariant check: %v", err)
					}
					checks.Add(1)
					time.Sleep(5 * time.Millisecond)
				}
			}()
			for i := 0; i < tc.sweepers; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
					for background.Err() == nil {
						life, kill := context.WithCancel(background)
						gate := whole
						if tc.kill {
							gate = &killingGate{Gate: whole, rng: rng, kill: kill, killed: &killed}
						}
						give := restock.New(restock.Config{Record: r.eng.Store, Gate: gate, Now: clock.Now,
							OrphanGrace: 5 * time.Second})
						s := sweeper.New(sweeper.Config{Restock: give, Sales: r.eng.Catalog, Now: clock.Now, Batch: 4})
						for life.Err() == nil {
							_, _ = s.SweepOnce(life)
							if rng.IntN(8) == 0 {
								_, _ = s.ReconcileAll(life)
							}
							time.Sleep(2 * time.Millisecond)
						}
						kill() // and a new incarnation starts
					}
				}(i)
			}
			// Half the winners pay, a fifth cancel, the rest let the hold
			// lapse; lapsed and cancelled units sell again.
			l := r.startLoad(ctx, sku, 4*stock, workers, func(i int) shopperPlan {
				return shopperPlan{confirm: i%2 == 0, cancel: i%5 == 1}
			})
			outcomes := l.wait(t, within)
			stop()
			wg.Wait()
			if tc.kill && killed.Load() == 0 {
				t.Fatal("no sweeper was killed; the drill proved nothing")
			}
			if checks.Load() < 10 {
				t.Fatalf("only %d invariant checks ran", checks.Load())
			}
			if st := r.saleState(sku); st != flashsale.SaleOpen {
				t.Fatalf("the sale is %s at the end; the invariant paused it: %q", st, r.sale(sku).PauseReason)
			}
			r.settle(sku)
			totals, err := r.eng.Store.SaleTotals(context.Background(), r.sale(sku).ID)
			if err != nil {
				t.Fatal(err)
			}
			if totals.Expired == 0 || totals.Cancelled == 0 {
				t.Fatalf("totals %+v: nothing expired or was cancelled; the drill proved nothing", totals)
			}
			fault := fmt.Sprintf("%s (%d expired, %d checks)", tc.fault, totals.Expired, checks.Load())
			if tc.kill {
				fault = fmt.Sprintf("%s (%d killed, %d expired)", tc.fault, killed.Load(), totals.Expired)
			}
			r.verify(sku, outcomes, row{fault: fault})
		})
	}
}
