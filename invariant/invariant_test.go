package invariant

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/memory"
)

// record is a fake record whose totals the test moves step by step.
type record struct {
	mu     sync.Mutex
	totals flashsale.SaleTotals
}

func (r *record) SaleTotals(context.Context, string) (flashsale.SaleTotals, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.totals, nil
}

func (r *record) add(pending, confirmed int64) {
	r.mu.Lock()
	r.totals.Pending += pending
	r.totals.Confirmed += confirmed
	r.mu.Unlock()
}

type pauses struct {
	mu      sync.Mutex
	reasons []string
}

func (p *pauses) pause(_ context.Context, _ string, reason string) {
	p.mu.Lock()
	p.reasons = append(p.reasons, reason)
	p.mu.Unlock()
}

var now = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

func setup(t *testing.T, stock int64) (*memory.Gate, *record, *pauses, *Watcher, *flashsale.Sale) {
	t.Helper()
	g := memory.New(memory.Config{Now: func() time.Time { return now }})
	sale := &flashsale.Sale{ID: "sale_1", SKU: "sku", InitialStock: int(stock), State: flashsale.SaleOpen, Epoch: 1}
	if _, err := g.Load(context.Background(), sale.ID, stock, 1, "test"); err != nil {
		t.Fatal(err)
	}
	rec, p := &record{}, &pauses{}
	w := New(Config{Gate: g, Store: rec, Pause: p.pause, Now: func() time.Time { return now }})
	return g, rec, p, w, sale
}

// TestVerdict: each way the invariant can fail is named, and a healthy
// snapshot passes.
func TestVerdict(t *testing.T) {
	healthy := flashsale.GateSnapshot{Loaded: true, Initial: 10, Counter: 7, Won: 5, Restocked: 2, AuditedCounter: 7}
	sharded := flashsale.GateSnapshot{Loaded: true, Initial: 10, Counter: 7, Won: 5, Restocked: 2, AuditedCounter: 7,
		Shards: 3, InFlight: 2}
	cases := []struct {
		name          string
		first, second flashsale.GateSnapshot
		live          int64
		want          string
	}{
		{"healthy", healthy, healthy, 3, ""},
		{"holds in flight (gate ahead of record)", healthy, healthy, 1, ""},
		{"unaudited writer", healthy, func() flashsale.GateSnapshot { s := healthy; s.Counter = 9; return s }(), 3, "unaudited"},
		{"audited second writer", healthy, func() flashsale.GateSnapshot { s := healthy; s.Counter, s.AuditedCounter = 9, 9; return s }(), 3, "changed outside"},
		{"gate forgot holds", healthy, healthy, 4, "forgot holds"},
		{"restock raced between the snapshots", healthy, func() flashsale.GateSnapshot {
			s := healthy
			s.Counter, s.AuditedCounter, s.Restocked = 8, 8, 3
			return s
		}(), 3, ""},
		// Split over shards: sums, with units in flight in the counter.
		{"shards, units in flight", sharded, sharded, 3, ""},
		{"shards, writes that cancel out", sharded, func() flashsale.GateSnapshot { s := sharded; s.ShardDrift = 4; return s }(), 3, "shards disagree"},
		{"shards, a transfer created units", sharded, func() flashsale.GateSnapshot {
			s := sharded
			s.Counter, s.AuditedCounter = 8, 8
			return s
		}(), 3, "transfer created or lost +1"},
	}
	for _, c := range cases {
		got := verdict(c.first, c.second, c.live)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: verdict %q, want one containing %q", c.name, got, c.want)
		}
	}
}

// TestSecondWriterPauses: a counter changed behind the gate fails the
// check, pauses the sale and names the writer from the audit log.
func TestSecondWriterPauses(t *testing.T) {
	g, _, p, w, sale := setup(t, 10)
	if res, err := w.Check(context.Background(), sale); err != nil || !res.OK {
		t.Fatalf("healthy: %+v %v", res, err)
	}
	if err := g.Adjust(sale.ID, 3, "promo-job"); err != nil {
		t.Fatal(err)
	}
	res, err := w.Check(context.Background(), sale)
	if err != nil || res.OK || res.Difference != 3 {
		t.Fatalf("after the second writer: %+v %v", res, err)
	}
	if len(p.reasons) != 1 || !strings.Contains(p.reasons[0], `"promo-job"`) {
		t.Fatalf("pauses %q", p.reasons)
	}
	if last, ok := w.Last(sale.ID); !ok || last.OK {
		t.Fatalf("last result %+v", last)
	}
}

// TestNoFalsePauseUnderInterleaving drives the real protocol's steps — a
// hold enters the gate before the record and leaves the record before the
// gate — interleaved at random with the watcher's three reads, and checks
// that no interleaving ever fails the invariant. The same run with the
// gate forgetting a hold must fail it.
func TestNoFalsePauseUnderInterleaving(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		g, rec, p, w, sale := setup(t, 20)
		ctx := context.Background()
		type step func()
		var procs [][]step
		n := 0
		newHold := func() []step {
			n++
			id, user := fmt.Sprintf("r%d", n), fmt.Sprintf("u%d", n)
			return []step{
				func() {
					_, _ = g.Reserve(ctx, flashsale.GateReserve{SaleID: sale.ID, ReservationID: id, UserID: user, Quantity: 1,
						IdempotencyKey: "k", RequestHash: "h", Epoch: 1, Now: now})
				},
				func() {
					if h, ok, _ := g.Lookup(ctx, sale.ID, user, "k"); ok && h.ReservationID == id {
						rec.add(1, 0) // written as pending
					}
				},
				func() { // expire: the record first...
					if h, ok, _ := g.Lookup(ctx, sale.ID, user, "k"); ok && h.ReservationID == id {
						rec.add(-1, 0)
					}
				},
				func() { _, _ = g.Restock(ctx, sale.ID, id, "sweeper") }, // ...then the gate
			}
		}
		for i := 0; i < 6; i++ {
			procs = append(procs, newHold())
		}
		var failures []string
		check := func() []step {
			var first flashsale.GateSnapshot
			var live int64
			return []step{
				func() { first, _ = g.Snapshot(ctx, sale.ID) },
				func() { tot, _ := rec.SaleTotals(ctx, sale.ID); live = tot.Pending + tot.Confirmed },
				func() {
					second, _ := g.Snapshot(ctx, sale.ID)
					if v := verdict(first, second, live); v != "" {
						failures = append(failures, v)
					}
				},
			}
		}
		for i := 0; i < 4; i++ {
			procs = append(procs, check())
		}
		for len(procs) > 0 {
			i := rng.IntN(len(procs))
			procs[i][0]()
			procs[i] = procs[i][1:]
			if len(procs[i]) == 0 {
				procs = append(procs[:i], procs[i+1:]...)
			}
		}
		if len(failures) > 0 {
			t.Fatalf("seed %d: a healthy interleaving failed the invariant: %v", seed, failures)
		}
		if res, err := w.Check(ctx, sale); err != nil || !res.OK || res.Difference != 0 || len(p.reasons) != 0 {
			t.Fatalf("seed %d: at rest %+v %v %v", seed, res, err, p.reasons)
		}
	}

	// The detector itself: the gate forgets a live hold (a rebuild from a
	// stale snapshot would do this), and the check must fail.
	g, rec, p, w, sale := setup(t, 20)
	ctx := context.Background()
	_, _ = g.Reserve(ctx, flashsale.GateReserve{SaleID: sale.ID, ReservationID: "r1", UserID: "u1", Quantity: 1,
		IdempotencyKey: "k", RequestHash: "h", Epoch: 1, Now: now})
	rec.add(1, 0)
	if err := g.Rebuild(ctx, sale.ID, 20, 1, nil, nil, "stale rebuild"); err != nil {
		t.Fatal(err)
	}
	if err := g.SetPaused(ctx, sale.ID, false, "test"); err != nil {
		t.Fatal(err)
	}
	res, err := w.Check(ctx, sale)
	if err != nil || res.OK || !strings.Contains(res.Reason, "forgot holds") || len(p.reasons) != 1 {
		t.Fatalf("a forgotten hold: %+v %v %v", res, err, p.reasons)
	}
}

// shardedGate serves snapshots the test sets, as a sharded gate's would
// read.
type shardedGate struct {
	*memory.Gate
	snap flashsale.GateSnapshot
}

func (g *shardedGate) Snapshot(context.Context, string) (flashsale.GateSnapshot, error) {
	return g.snap, nil
}

// TestLostShardIsNotJudged: while a shard is lost its figures are missing
// from the sums, which would read as a shortfall; the sale is judged
// again once the shard is rebuilt.
func TestLostShardIsNotJudged(t *testing.T) {
	_, rec, p, _, sale := setup(t, 10)
	g := &shardedGate{Gate: memory.New(memory.Config{}),
		snap: flashsale.GateSnapshot{Loaded: true, Initial: 10, Counter: 4, Won: 3, AuditedCounter: 4, Shards: 3, Unloaded: 1}}
	w := New(Config{Gate: g, Store: rec, Pause: p.pause, Now: func() time.Time { return now }})
	rec.add(3, 0)
	if res, err := w.Check(context.Background(), sale); err != nil || !res.OK {
		t.Fatalf("with a shard lost: %+v, %v; want not judged", res, err)
	}
	g.snap.Unloaded, g.snap.ShardDrift = 0, 1
	if res, err := w.Check(context.Background(), sale); err != nil || res.OK || len(p.reasons) != 1 {
		t.Fatalf("with every shard back and one drifting: %+v, %v, pauses %q", res, err, p.reasons)
	}
}
