package sweeper

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/memory"
	"github.com/flashsale/flashsale/postgres"
	fsredis "github.com/flashsale/flashsale/redis"
	"github.com/flashsale/flashsale/restock"
	"github.com/flashsale/flashsale/sqlite"
)

var t0 = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

type sales []*flashsale.Sale

func (s sales) Active(context.Context) ([]*flashsale.Sale, error) { return s, nil }

type rig struct {
	name  string
	store flashsale.Store
	gate  restock.Gate
}

var rigNames = []string{"memory+sqlite", "redis+postgres"}

func rigs() []func(t *testing.T) rig {
	return []func(t *testing.T) rig{
		func(t *testing.T) rig {
			st, err := sqlite.Open(context.Background(), t.TempDir()+"/r.db")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return rig{"memory+sqlite", st, memory.New(memory.Config{})}
		},
		func(t *testing.T) rig {
			st, err := postgres.Open(context.Background(), testenv.Postgres(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			client, prefix := testenv.Redis(t)
			return rig{"redis+postgres", st, fsredis.New(fsredis.Config{Client: client, Prefix: prefix})}
		},
	}
}

func (r rig) sweeper(s sales, now func() time.Time, batch int) *Sweeper {
	return New(Config{Restock: restock.New(restock.Config{Record: r.store, Gate: r.gate, Now: now}),
		Sales: s, Now: now, Batch: batch})
}

// holds makes n pending holds of one unit, through the gate then the
// record, as the purchase path does, expiring at t0+1s.
func holds(t *testing.T, r rig, sale *flashsale.Sale, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		id, user := flashsale.NewID("res_"), fmt.Sprintf("u%d", i)
		out, err := r.gate.Reserve(ctx, flashsale.GateReserve{SaleID: sale.ID, ReservationID: id, UserID: user, Quantity: 1,
			IdempotencyKey: "k", RequestHash: "h", Epoch: 1, Now: t0})
		if err != nil || out.Verdict != flashsale.VerdictWon {
			t.Fatalf("reserve: %+v %v", out, err)
		}
		if err := r.store.CreateReservation(ctx, &flashsale.Reservation{ID: id, SaleID: sale.ID, UserID: user, Quantity: 1,
			State: flashsale.ReservationPending, IdempotencyKey: "k", RequestHash: "h", Epoch: 1, CreatedAt: t0,
			ExpiresAt: t0.Add(time.Second), Version: 1}); err != nil {
			t.Fatal(err)
		}
	}
}

func newSale(t *testing.T, r rig, stock int) *flashsale.Sale {
	t.Helper()
	s := &flashsale.Sale{ID: flashsale.NewID("sale_"), SKU: "sku-" + flashsale.NewID(""), InitialStock: stock, OpensAt: t0,
		HoldSeconds: 1, PerUserLimit: 1, Fairness: flashsale.FairnessFIFO, Shards: 1, State: flashsale.SaleOpen,
		Epoch: 1, Version: 1, CreatedAt: t0, UpdatedAt: t0}
	if err := r.store.CreateSale(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if _, err := r.gate.Load(context.Background(), s.ID, int64(stock), 1, "test"); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSweepersDrainEveryBatch: five sweepers at once, in batches far
// smaller than the expired holds, give every expired hold back exactly
// once, and stop when none is left.
func TestSweepersDrainEveryBatch(t *testing.T) {
	for i, mk := range rigs() {
		t.Run(rigNames[i], func(t *testing.T) {
			r := mk(t)
			sale := newSale(t, r, 300)
			holds(t, r, sale, 200)
			now := func() time.Time { return t0.Add(2 * time.Second) }
			var moved atomic.Int64
			var wg sync.WaitGroup
			for range 5 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n, err := r.sweeper(sales{sale}, now, 7).SweepOnce(context.Background())
					if err != nil {
						t.Error(err)
					}
					moved.Add(int64(n))
				}()
			}
			wg.Wait()
			if moved.Load() != 200 {
				t.Fatalf("%s: sweepers moved %d units, want 200", r.name, moved.Load())
			}
			if n, err := r.sweeper(sales{sale}, now, 7).SweepOnce(context.Background()); n != 0 || err != nil {
				t.Fatalf("a sweep after all moved %d: %v", n, err)
			}
			snap, _ := r.gate.Snapshot(context.Background(), sale.ID)
			totals, _ := r.store.SaleTotals(context.Background(), sale.ID)
			if snap.Counter != 300 || snap.Drift() != 0 || totals.Expired != 200 || totals.Pending != 0 {
				t.Fatalf("after: %+v %+v", snap, totals)
			}
		})
	}
}

// TestReconcileAllLooksAfterEverySale: a hold the gate took but the record
// never got, in each of two sales, is voided after the grace period and its
// units come back once, while live holds are left alone.
func TestReconcileAllLooksAfterEverySale(t *testing.T) {
	for i, mk := range rigs() {
		t.Run(rigNames[i], func(t *testing.T) {
			r := mk(t)
			ctx := context.Background()
			var two sales
			for range 2 {
				sale := newSale(t, r, 10)
				holds(t, r, sale, 1)
				out, err := r.gate.Reserve(ctx, flashsale.GateReserve{SaleID: sale.ID, ReservationID: "res_orphan_" + sale.ID,
					UserID: "ghost", Quantity: 2, IdempotencyKey: "gk", RequestHash: "h", Epoch: 1, Now: t0})
				if err != nil || out.Verdict != flashsale.VerdictWon {
					t.Fatal(out, err)
				}
				two = append(two, sale)
			}
			at := t0.Add(10 * time.Second)
			s := New(Config{Restock: restock.New(restock.Config{Record: r.store, Gate: r.gate, Now: func() time.Time { return at }}),
				Sales: two, Now: func() time.Time { return at }})
			if n, err := s.ReconcileAll(ctx); err != nil || n != 0 {
				t.Fatalf("inside the grace: %d %v", n, err)
			}
			at = t0.Add(31 * time.Second)
			if n, err := s.ReconcileAll(ctx); err != nil || n != 4 {
				t.Fatalf("after the grace: %d %v", n, err)
			}
			if n, _ := s.ReconcileAll(ctx); n != 0 {
				t.Fatalf("again: %d", n)
			}
			for _, sale := range two {
				if snap, _ := r.gate.Snapshot(ctx, sale.ID); snap.Counter != 9 || snap.Held() != 1 {
					t.Fatalf("snapshot %+v", snap)
				}
			}
		})
	}
}
