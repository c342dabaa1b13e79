package restock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
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

// Both gates give units back; the compiler checks it here, where they are
// handed to the one package that may ask them.
var (
	_ Gate = (*memory.Gate)(nil)
	_ Gate = (*fsredis.Gate)(nil)
	_ Gate = (*fsredis.ShardedGate)(nil)
)

var t0 = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

// rig is one record and one gate.
type rig struct {
	name  string
	store flashsale.Store
	gate  Gate
}

// rigs are every record with every gate.
func rigs() []namedRig {
	records := []struct {
		name string
		open func(t *testing.T) flashsale.Store
	}{
		{"sqlite", func(t *testing.T) flashsale.Store {
			st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "r.db"))
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
		{"postgres", func(t *testing.T) flashsale.Store {
			st, err := postgres.Open(t.Context(), testenv.Postgres(t), postgres.WithMaxConns(8))
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
	}
	gates := []struct {
		name string
		open func(t *testing.T) Gate
	}{
		{"memory", func(t *testing.T) Gate { return memory.New(memory.Config{}) }},
		{"redis", func(t *testing.T) Gate {
			client, prefix := testenv.Redis(t)
			return fsredis.New(fsredis.Config{Client: client, Prefix: prefix})
		}},
		// The gate the engine runs on Redis, with every sale split over
		// two shards.
		{"sharded", func(t *testing.T) Gate {
			client, prefix := testenv.Redis(t)
			return fsredis.NewSharded(fsredis.ShardedConfig{Config: fsredis.Config{Client: client, Prefix: prefix},
				Shards: func(context.Context, string) (int, error) { return 2, nil }})
		}},
	}
	var out []namedRig
	for _, rec := range records {
		for _, g := range gates {
			out = append(out, namedRig{g.name + "+" + rec.name, func(t *testing.T) rig {
				st := rec.open(t)
				t.Cleanup(func() { st.Close() })
				return rig{g.name + "+" + rec.name, st, g.open(t)}
			}})
		}
	}
	return out
}

// namedRig makes a rig in a test of its name.
type namedRig struct {
	name string
	make func(t *testing.T) rig
}

// forEachRig runs fn in a subtest for every record with every gate.
func forEachRig(t *testing.T, fn func(t *testing.T, r rig)) {
	for _, nr := range rigs() {
		t.Run(nr.name, func(t *testing.T) { fn(t, nr.make(t)) })
	}
}

// service is a Service of the rig. Its gate calls may take their time: on
// a loaded machine a give-back that outlived the default half second was
// made in the gate and counted by nobody (the caller saw a timeout, the
// reconciler found it done), which is not what these tests count.
func (r rig) service(now func() time.Time) *Service {
	return New(Config{Record: r.store, Gate: r.gate, Now: now, OrphanGrace: 30 * time.Second, GateTimeout: 30 * time.Second})
}

// newSale creates a sale of stock units at epoch 1 in the record, with
// holds of a second, and loads its counter.
func newSale(t *testing.T, r rig, stock int) *flashsale.Sale {
	t.Helper()
	s := &flashsale.Sale{ID: flashsale.NewID("sale_"), SKU: "sku-" + flashsale.NewID(""), InitialStock: stock, OpensAt: t0,
		HoldSeconds: 1, PerUserLimit: 2, Fairness: flashsale.FairnessFIFO, Shards: 1, State: flashsale.SaleOpen,
		Epoch: 1, Version: 1, CreatedAt: t0, UpdatedAt: t0}
	if err := r.store.CreateSale(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if _, err := r.gate.Load(context.Background(), s.ID, int64(stock), 1, "test"); err != nil {
		t.Fatal(err)
	}
	return s
}

// take has the gate take a hold of two units for user; written, the record
// takes it too, as the purchase path does.
func take(t *testing.T, r rig, sale *flashsale.Sale, user string, written bool) (flashsale.Hold, flashsale.GateOutcome) {
	t.Helper()
	id := flashsale.NewID("res_")
	out, err := r.gate.Reserve(context.Background(), flashsale.GateReserve{SaleID: sale.ID, ReservationID: id, UserID: user,
		Quantity: 2, IdempotencyKey: "k-" + user, RequestHash: "h", Epoch: 1, Now: t0})
	if err != nil || out.Verdict != flashsale.VerdictWon {
		t.Fatalf("reserve: %+v %v", out, err)
	}
	if written {
		if err := r.store.CreateReservation(context.Background(), &flashsale.Reservation{ID: id, SaleID: sale.ID, UserID: user,
			Quantity: 2, IdempotencyKey: "k-" + user, RequestHash: "h", Epoch: out.Epoch, CreatedAt: t0,
			ExpiresAt: t0.Add(sale.Hold())}); err != nil {
			t.Fatal(err)
		}
	}
	return out.Hold, out
}

// gaveBack counts the gate's give-backs (restock or void) of a hold, from
// its audit log.
func gaveBack(t *testing.T, r rig, saleID, reservationID string) int {
	t.Helper()
	entries, err := r.gate.Audit(context.Background(), saleID, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.ReservationID == reservationID && (e.Op == "restock" || e.Op == "void") {
			n++
		}
	}
	return n
}

// settled checks the counter is exactly the stock less the units held,
// and that nothing wrote to it behind the gate.
func settled(t *testing.T, r rig, sale *flashsale.Sale, counter int64) {
	t.Helper()
	snap, err := r.gate.Snapshot(context.Background(), sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Counter != counter || snap.Drift() != 0 {
		t.Fatalf("counter %d (drift %d), want %d", snap.Counter, snap.Drift(), counter)
	}
}

// all runs fn n times at once and waits.
func all(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); fn(i) }()
	}
	wg.Wait()
}

// TestEveryPathGivesBackOnce walks every path that returns units to the
// gate, each raced by several callers (several servers, retries, a
// reconciler beside them), and checks the units come back exactly once:
// one give-back in the gate's audit log, the counter at stock less what
// is still held.
func TestEveryPathGivesBackOnce(t *testing.T) {
	const racers = 6
	forEachRig(t, func(t *testing.T, r rig) {
		ctx := context.Background()
		now := func() time.Time { return t0.Add(2 * time.Second) }
		sale := newSale(t, r, 20)
		var counter int64 = 20

		t.Run("expiry", func(t *testing.T) {
			var ids []string
			for i := range 3 {
				h, _ := take(t, r, sale, fmt.Sprintf("exp-%d", i), true)
				ids = append(ids, h.ReservationID)
			}
			var units atomic.Int64
			all(racers, func(int) {
				_, n, err := r.service(now).Expire(ctx, now(), 1)
				if err != nil {
					t.Error(err)
				}
				units.Add(int64(n))
			})
			for {
				claimed, n, err := r.service(now).Expire(ctx, now(), 1)
				if err != nil {
					t.Fatal(err)
				}
				units.Add(int64(n))
				if claimed == 0 {
					break
				}
			}
			if units.Load() != 6 {
				t.Fatalf("expiries gave back %d units, want 6", units.Load())
			}
			for _, id := range ids {
				if n := gaveBack(t, r, sale.ID, id); n != 1 {
					t.Fatalf("hold %s given back %d times", id, n)
				}
			}
			settled(t, r, sale, counter)
		})

		t.Run("cancel", func(t *testing.T) {
			h, _ := take(t, r, sale, "canceller", true)
			settled(t, r, sale, counter-2)
			all(racers, func(int) {
				got, err := r.service(now).Cancel(ctx, h.ReservationID, "canceller")
				if err != nil || got.State != flashsale.ReservationCancelled {
					t.Errorf("cancel: %+v %v", got, err)
				}
			})
			if n := gaveBack(t, r, sale.ID, h.ReservationID); n != 1 {
				t.Fatalf("a cancelled hold given back %d times", n)
			}
			settled(t, r, sale, counter)
		})

		for _, to := range []flashsale.OrderState{flashsale.OrderCancelled, flashsale.OrderRefunded} {
			t.Run("order "+string(to), func(t *testing.T) {
				h, _ := take(t, r, sale, "buyer-"+string(to), true)
				_, ord, err := r.store.ConfirmReservation(ctx, h.ReservationID, "buyer-"+string(to), "pay", t0)
				if err != nil {
					t.Fatal(err)
				}
				version := ord.Version
				if to == flashsale.OrderRefunded {
					shipped, _, err := r.service(now).ChangeOrder(ctx, flashsale.OrderChange{OrderID: ord.ID, Version: version,
						To: flashsale.OrderShipped, Actor: "operator", At: t0.Add(time.Second)})
					if err != nil {
						t.Fatal(err)
					}
					version = shipped.Version
					settled(t, r, sale, counter-2) // shipping gives nothing back
				}
				var restocked atomic.Int64
				all(racers, func(int) {
					_, moved, err := r.service(now).ChangeOrder(ctx, flashsale.OrderChange{OrderID: ord.ID, Version: version,
						To: to, Actor: "operator", At: t0.Add(2 * time.Second)})
					if err != nil && !errors.Is(err, flashsale.ErrVersionConflict) {
						t.Error(err)
					}
					if moved {
						restocked.Add(1)
					}
				})
				if restocked.Load() != 1 || gaveBack(t, r, sale.ID, h.ReservationID) != 1 {
					t.Fatalf("order %s: %d callers restocked, %d give-backs; want 1 and 1", to, restocked.Load(),
						gaveBack(t, r, sale.ID, h.ReservationID))
				}
				settled(t, r, sale, counter)
			})
		}

		t.Run("void", func(t *testing.T) {
			// The gate took the hold, the record did not (its write
			// failed): every path that voids it races, the purchase path's
			// with the gate's epoch and the replay's without.
			// The replay's sale is the record's, whose epoch runs ahead of
			// the gate's during a rebuild: the tombstone takes the gate's.
			ahead := *sale
			ahead.Epoch = 7
			for _, replay := range []bool{false, true} {
				h, out := take(t, r, sale, fmt.Sprintf("unwritten-%t", replay), false)
				var moved atomic.Int64
				all(racers, func(int) {
					var ok bool
					if replay {
						ok = r.service(now).Void(ctx, &ahead, h, 0)
					} else {
						ok = r.service(now).Void(ctx, sale, h, out.Epoch)
					}
					if ok {
						moved.Add(1)
					}
				})
				if moved.Load() != 1 || gaveBack(t, r, sale.ID, h.ReservationID) != 1 {
					t.Fatalf("void: %d callers moved the units, %d give-backs", moved.Load(), gaveBack(t, r, sale.ID, h.ReservationID))
				}
				tomb, err := r.store.Reservation(ctx, h.ReservationID)
				if err != nil || tomb.State != flashsale.ReservationVoided || tomb.Epoch != out.Epoch || tomb.IdempotencyKey != "" {
					t.Fatalf("tombstone %+v %v; want voided at the gate's epoch %d, without its key", tomb, err, out.Epoch)
				}
				if _, found, _ := r.gate.Lookup(ctx, sale.ID, h.UserID, h.IdempotencyKey); found {
					t.Fatal("the voided hold's key still replays; the shopper's retry could never be a fresh attempt")
				}
				settled(t, r, sale, counter)
			}

			// A hold the record did take is live: voiding it gives
			// nothing back.
			live, _ := take(t, r, sale, "written", true)
			if r.service(now).Void(ctx, sale, live, 1) || gaveBack(t, r, sale.ID, live.ReservationID) != 0 {
				t.Fatal("a void gave back a hold the record has")
			}
			settled(t, r, sale, counter-2)
			if _, err := r.service(now).Cancel(ctx, live.ReservationID, "written"); err != nil {
				t.Fatal(err)
			}
			settled(t, r, sale, counter)
		})

		t.Run("reconcile", func(t *testing.T) {
			// Three give-backs cut between their two steps, and an orphan.
			s := r.service(now)
			expired, _ := take(t, r, sale, "cut-expiry", true)
			s.afterClaim = func(*flashsale.Reservation) bool { return true }
			if claimed, _, err := s.Expire(ctx, now(), 10); claimed != 1 || !errors.Is(err, errAbandoned) {
				t.Fatalf("the cut expiry: %d claimed, %v", claimed, err)
			}
			cancelled, _ := take(t, r, sale, "cut-cancel", true)
			if _, restocked, err := r.store.CancelReservation(ctx, cancelled.ReservationID, "cut-cancel", t0); err != nil || !restocked {
				t.Fatal(restocked, err)
			}
			voided, out := take(t, r, sale, "cut-void", false)
			if ok, err := r.store.VoidReservation(ctx, tombstone(sale, voided, out.Epoch, t0)); err != nil || !ok {
				t.Fatal(ok, err)
			}
			orphan, _ := take(t, r, sale, "orphan", false)
			settled(t, r, sale, counter-8)

			// Inside the grace the orphan may still be on its way to the
			// record: it stays.
			early := r.service(func() time.Time { return t0.Add(10 * time.Second) })
			var units atomic.Int64
			all(racers, func(int) {
				n, err := early.Reconcile(ctx, sale)
				if err != nil {
					t.Error(err)
				}
				units.Add(int64(n))
			})
			if units.Load() != 6 {
				t.Fatalf("reconcilers gave back %d units inside the grace, want 6", units.Load())
			}
			for _, h := range []flashsale.Hold{expired, cancelled, voided} {
				if n := gaveBack(t, r, sale.ID, h.ReservationID); n != 1 {
					t.Fatalf("hold %s given back %d times", h.ReservationID, n)
				}
			}
			settled(t, r, sale, counter-2)

			late := r.service(func() time.Time { return t0.Add(31 * time.Second) })
			ahead := *sale
			ahead.Epoch = 7 // the record's, ahead of the gate's during a rebuild
			units.Store(0)
			all(racers, func(int) {
				n, err := late.Reconcile(ctx, &ahead)
				if err != nil {
					t.Error(err)
				}
				units.Add(int64(n))
			})
			if units.Load() != 2 || gaveBack(t, r, sale.ID, orphan.ReservationID) != 1 {
				t.Fatalf("the orphan: %d units, %d give-backs", units.Load(), gaveBack(t, r, sale.ID, orphan.ReservationID))
			}
			tomb, err := r.store.Reservation(ctx, orphan.ReservationID)
			if err != nil || tomb.State != flashsale.ReservationVoided || tomb.Epoch != out.Epoch {
				t.Fatalf("the orphan's tombstone %+v %v; want voided at the gate's epoch %d", tomb, err, out.Epoch)
			}
			if n, err := late.Reconcile(ctx, sale); n != 0 || err != nil {
				t.Fatalf("a reconciliation after all gave back %d more: %v", n, err)
			}
			settled(t, r, sale, counter)
		})
	})
}

// TestExpiryKilledAtRandomPoints: five sweepers at once, each killed at a
// random point between the record's claim and the gate's restock; then the
// reconciler. Every expired hold comes back exactly once.
func TestExpiryKilledAtRandomPoints(t *testing.T) {
	forEachRig(t, func(t *testing.T, r rig) {
		sale := newSale(t, r, 1000)
		for i := range 200 {
			take(t, r, sale, fmt.Sprintf("u%d", i), true)
		}
		now := func() time.Time { return t0.Add(2 * time.Second) }
		var moved atomic.Int64
		all(5, func(i int) {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			s := r.service(now)
			s.afterClaim = func(*flashsale.Reservation) bool { return rng.IntN(40) == 0 }
			for {
				claimed, n, err := s.Expire(context.Background(), now(), 7)
				moved.Add(int64(n))
				if err == nil && claimed < 7 {
					return // nothing more to claim
				}
				// Killed: a new incarnation starts over.
			}
		})
		fixed, err := r.service(now).Reconcile(context.Background(), sale)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := r.service(now).Reconcile(context.Background(), sale); again != 0 {
			t.Fatalf("a second reconciliation moved %d more units", again)
		}
		if moved.Load()+int64(fixed) != 400 {
			t.Fatalf("sweepers moved %d and the reconciler %d units, want 400 in all", moved.Load(), fixed)
		}
		if fixed == 0 {
			t.Fatalf("no sweeper was killed between its steps; the test proved nothing")
		}
		totals, _ := r.store.SaleTotals(context.Background(), sale.ID)
		if totals.Expired != 400 || totals.Pending != 0 {
			t.Fatalf("totals %+v", totals)
		}
		settled(t, r, sale, 1000)
	})
}

// failing is a gate whose give-backs fail, or answer that the sale is not
// loaded.
type failing struct {
	Gate
	err error
}

func (g failing) Restock(context.Context, string, string, string) (bool, error) { return false, g.err }

func (g failing) Void(context.Context, string, flashsale.Hold, string) (bool, error) {
	return false, g.err
}

// TestOneGatePolicy: on every path, a gate that has no counter for the
// sale is no failure (its rebuild reads the record, where the hold is
// over), and a gate that fails does not undo or fail what the record
// decided: the reconciler finishes, once.
func TestOneGatePolicy(t *testing.T) {
	forEachRig(t, func(t *testing.T, r rig) {
		ctx := context.Background()
		now := func() time.Time { return t0.Add(2 * time.Second) }
		for _, tc := range []struct {
			name string
			err  error
		}{{"not loaded", flashsale.ErrNotLoaded}, {"unreachable", errors.New("connection reset (fault drill)")}} {
			t.Run(tc.name, func(t *testing.T) {
				sale := newSale(t, r, 20)
				broken := New(Config{Record: r.store, Gate: failing{r.gate, tc.err}, Now: now})
				cancelled, _ := take(t, r, sale, "c", true)
				if got, err := broken.Cancel(ctx, cancelled.ReservationID, "c"); err != nil || got.State != flashsale.ReservationCancelled {
					t.Fatalf("cancel: %+v %v", got, err)
				}
				bought, _ := take(t, r, sale, "o", true)
				_, ord, err := r.store.ConfirmReservation(ctx, bought.ReservationID, "o", "pay", t0)
				if err != nil {
					t.Fatal(err)
				}
				if o, restocked, err := broken.ChangeOrder(ctx, flashsale.OrderChange{OrderID: ord.ID, Version: ord.Version,
					To: flashsale.OrderCancelled, Actor: "operator", At: t0}); err != nil || restocked || o.State != flashsale.OrderCancelled {
					t.Fatalf("order cancel: %+v %v %v", o, restocked, err)
				}
				unwritten, out := take(t, r, sale, "v", false)
				if broken.Void(ctx, sale, unwritten, out.Epoch) {
					t.Fatal("a void the gate refused reports the units moved")
				}
				take(t, r, sale, "e", true)
				if claimed, units, err := broken.Expire(ctx, now(), 10); claimed != 1 || units != 0 || err != nil {
					t.Fatalf("expire: %d claimed, %d units, %v", claimed, units, err)
				}
				n, err := broken.Reconcile(ctx, sale)
				if tc.err == flashsale.ErrNotLoaded {
					if err != nil || n != 0 {
						t.Fatalf("reconcile with the sale not loaded: %d %v", n, err)
					}
				} else if err == nil {
					t.Fatal("reconcile hid the gate's failure")
				}
				settled(t, r, sale, 12)
				// The gate answers again: the reconciler finishes every
				// give-back, once.
				if n, err := r.service(now).Reconcile(ctx, sale); n != 8 || err != nil {
					t.Fatalf("the reconciler gave back %d units, %v; want 8", n, err)
				}
				settled(t, r, sale, 20)
			})
		}
	})
}
