package sweeper

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/memory"
	"github.com/flashsale/flashsale/postgres"
	fsredis "github.com/flashsale/flashsale/redis"
	"github.com/flashsale/flashsale/sqlite"
)

var t0 = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

type sales []*flashsale.Sale

func (s sales) Active(context.Context) ([]*flashsale.Sale, error) { return s, nil }

type rig struct {
	name  string
	store flashsale.Store
	gate  flashsale.GateAdmin
}

func rigs(t *testing.T) []func(t *testing.T) rig {
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

// TestSweepersKilledAtRandomPoints: five sweepers at once, each killed at a
// random point between the record's claim and the gate's restock; then the
// reconciler. Every expired hold comes back exactly once.
func TestSweepersKilledAtRandomPoints(t *testing.T) {
	for _, mk := range rigs(t) {
		r := mk(t)
		t.Run(r.name, func(t *testing.T) {
			sale := newSale(t, r, 300)
			holds(t, r, sale, 200)
			var moved atomic.Int64
			var wg sync.WaitGroup
			for i := 0; i < 5; i++ {
				rng := rand.New(rand.NewPCG(uint64(i), 7))
				s := New(Config{Store: r.store, Gate: r.gate, Sales: sales{sale}, Now: func() time.Time { return t0.Add(2 * time.Second) },
					Batch: 7, afterClaim: func(*flashsale.Reservation) bool { return rng.IntN(40) == 0 }})
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						n, err := s.SweepOnce(context.Background())
						moved.Add(int64(n))
						if err == nil {
							return // nothing more to claim
						}
						// Killed: a new incarnation starts over.
					}
				}()
			}
			wg.Wait()
			rec := New(Config{Store: r.store, Gate: r.gate, Sales: sales{sale}, Now: func() time.Time { return t0.Add(2 * time.Second) }})
			fixed, err := rec.ReconcileAll(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := rec.ReconcileAll(context.Background()); again != 0 {
				t.Fatalf("a second reconciliation moved %d more units", again)
			}
			if moved.Load()+int64(fixed) != 200 {
				t.Fatalf("sweepers moved %d and the reconciler %d units, want 200 in all", moved.Load(), fixed)
			}
			if fixed == 0 {
				t.Fatalf("no sweeper was killed between its steps; the test proved nothing")
			}
			snap, _ := r.gate.Snapshot(context.Background(), sale.ID)
			totals, _ := r.store.SaleTotals(context.Background(), sale.ID)
			if snap.Counter != 300 || snap.Drift() != 0 || totals.Expired != 200 || totals.Pending != 0 {
				t.Fatalf("after: %+v %+v", snap, totals)
			}
		})
	}
}

// TestReconcilerVoidsOrphans: a hold the gate took but the record never
// got is voided after the grace period — not before — and its units come
// back once, while a live hold is left alone.
func TestReconcilerVoidsOrphans(t *testing.T) {
	for _, mk := range rigs(t) {
		r := mk(t)
		t.Run(r.name, func(t *testing.T) {
			ctx := context.Background()
			sale := newSale(t, r, 10)
			holds(t, r, sale, 1)
			out, err := r.gate.Reserve(ctx, flashsale.GateReserve{SaleID: sale.ID, ReservationID: "res_orphan", UserID: "ghost",
				Quantity: 2, IdempotencyKey: "gk", RequestHash: "h", Epoch: 1, Now: t0})
			if err != nil || out.Verdict != flashsale.VerdictWon {
				t.Fatal(out, err)
			}
			now := t0.Add(10 * time.Second)
			s := New(Config{Store: r.store, Gate: r.gate, Sales: sales{sale}, Now: func() time.Time { return now }, OrphanGrace: 30 * time.Second})
			if n, err := s.Reconcile(ctx, sale); err != nil || n != 0 {
				t.Fatalf("inside the grace: %d %v", n, err)
			}
			now = t0.Add(31 * time.Second)
			if n, err := s.Reconcile(ctx, sale); err != nil || n != 2 {
				t.Fatalf("after the grace: %d %v", n, err)
			}
			if n, _ := s.Reconcile(ctx, sale); n != 0 {
				t.Fatalf("again: %d", n)
			}
			states, _ := r.store.ReservationStates(ctx, sale.ID, []string{"res_orphan"})
			if states["res_orphan"] != flashsale.ReservationVoided {
				t.Fatalf("orphan state %q", states["res_orphan"])
			}
			if _, found, _ := r.gate.Lookup(ctx, sale.ID, "ghost", "gk"); found {
				t.Fatal("the orphan's key still replays; a retry could never make a fresh attempt")
			}
			if snap, _ := r.gate.Snapshot(ctx, sale.ID); snap.Counter != 9 || snap.Held() != 1 {
				t.Fatalf("snapshot %+v", snap)
			}
		})
	}
}
