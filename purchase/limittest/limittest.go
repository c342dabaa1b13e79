// Package limittest is the conformance suite of purchase.Limiter: one set of
// tests run on every implementation (in process and in Redis).
//
// Overselling is neither prevented nor caused here: the limits are a budget,
// the gate counts the stock.
package limittest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/purchase"
)

// Exercise runs the suite. newLimiter returns a limiter whose account and
// instrument budgets both allow Burst 3 and refill one every second.
func Exercise(t *testing.T, newLimiter func(t *testing.T) purchase.Limiter) {
	t0 := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	ctx := context.Background()
	t.Run("BurstThenWait", func(t *testing.T) {
		l, sale := newLimiter(t), flashsale.NewID("sale_")
		for i := 0; i < 3; i++ {
			if _, ok, err := l.Allow(ctx, sale, "alice", "", t0); !ok || err != nil {
				t.Fatalf("request %d of the burst: %v %v", i+1, ok, err)
			}
		}
		wait, ok, err := l.Allow(ctx, sale, "alice", "", t0)
		if ok || err != nil || wait <= 0 || wait > time.Second {
			t.Fatalf("beyond the burst: wait %v ok %v err %v", wait, ok, err)
		}
		if _, ok, _ := l.Allow(ctx, sale, "alice", "", t0.Add(time.Second)); !ok {
			t.Fatal("a refilled request was refused")
		}
		if _, ok, _ := l.Allow(ctx, sale, "bob", "", t0); !ok {
			t.Fatal("another shopper paid for alice's budget")
		}
		if _, ok, _ := l.Allow(ctx, flashsale.NewID("sale_"), "alice", "", t0); !ok {
			t.Fatal("another sale's budget is not separate")
		}
	})
	t.Run("InstrumentBudgetAcrossAccounts", func(t *testing.T) {
		l, sale := newLimiter(t), flashsale.NewID("sale_")
		for i, u := range []string{"a1", "a2", "a3"} {
			if _, ok, _ := l.Allow(ctx, sale, u, "card-1", t0); !ok {
				t.Fatalf("account %d with the card: refused", i+1)
			}
		}
		if _, ok, _ := l.Allow(ctx, sale, "a4", "card-1", t0); ok {
			t.Fatal("a fresh account passed on a card whose budget is spent")
		}
		// The refusal spent nothing of a4's own budget.
		for i := 0; i < 3; i++ {
			if _, ok, _ := l.Allow(ctx, sale, "a4", "", t0); !ok {
				t.Fatalf("a4's own request %d was refused: the refused card request spent it", i+1)
			}
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		l, sale := newLimiter(t), flashsale.NewID("sale_")
		var allowed atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 100; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, ok, err := l.Allow(ctx, sale, "bot", "card-9", t0); err != nil {
					t.Error(err)
				} else if ok {
					allowed.Add(1)
				}
			}()
		}
		wg.Wait()
		if allowed.Load() != 3 {
			t.Fatalf("%d of 100 concurrent requests passed a burst of 3", allowed.Load())
		}
	})
}
