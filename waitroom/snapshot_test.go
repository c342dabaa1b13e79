package waitroom

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/memory"
)

type snapGate struct {
	flashsale.GateAdmin
	snap flashsale.GateSnapshot
}

func (g *snapGate) Snapshot(context.Context, string) (flashsale.GateSnapshot, error) {
	return g.snap, nil
}

// totalsStore counts the reads of the units held.
type totalsStore struct {
	pending int64
	reads   int
}

func (s *totalsStore) PendingUnits(context.Context, string) (int64, error) {
	s.reads++
	return s.pending, nil
}

func (s *totalsStore) Draw(context.Context, string) (*flashsale.Draw, error) {
	return nil, flashsale.ErrNotFound
}

type oneSale struct{ s *flashsale.Sale }

func (c oneSale) BySKU(context.Context, string) (*flashsale.Sale, error) { return c.s, nil }

// Once sold out, the units held are read from the record at most once a
// second while some are held, and not again once none are, as long as the
// gate has taken no unit since: the crowd's polls never queue on the
// record, and sold out becomes final at most a second late, never early.
func TestSnapshotReadsPendingSparingly(t *testing.T) {
	ctx := context.Background()
	clock := testenv.NewClock(opens)
	sale := &flashsale.Sale{ID: "sale_s", SKU: "s", OpensAt: opens, State: flashsale.SaleOpen, Epoch: 1}
	gate := &snapGate{snap: flashsale.GateSnapshot{Loaded: true, Counter: 0, Epoch: 1, Won: 10}}
	store := &totalsStore{pending: 3}
	o := &OriginSnapshots{Catalog: oneSale{sale}, Gate: gate, Store: store, Queue: memory.NewQueue(), Now: clock.Now}
	build := func() *Snapshot {
		t.Helper()
		snap, err := o.build(ctx, sale, 0)
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	if snap := build(); snap.Pending != 3 || store.reads != 1 {
		t.Fatalf("first build: pending %d, %d reads", snap.Pending, store.reads)
	}
	store.pending = 0 // the holds were paid or expired
	clock.Advance(500 * time.Millisecond)
	if snap := build(); snap.Pending != 3 || store.reads != 1 {
		t.Fatalf("within the second: pending %d, %d reads; want the count reused", snap.Pending, store.reads)
	}
	clock.Advance(600 * time.Millisecond)
	if snap := build(); snap.Pending != 0 || store.reads != 2 {
		t.Fatalf("after the second: pending %d, %d reads; want a new read", snap.Pending, store.reads)
	}
	clock.Advance(time.Minute)
	if snap := build(); snap.Pending != 0 || store.reads != 2 {
		t.Fatalf("final, gate unchanged: pending %d, %d reads; want no read", snap.Pending, store.reads)
	}
	// A unit came back and was taken again: the record is asked at once,
	// so sold out is never announced final while a new hold is pending.
	gate.snap.Won, store.pending = 11, 1
	if snap := build(); snap.Pending != 1 || store.reads != 3 {
		t.Fatalf("after a new win: pending %d, %d reads", snap.Pending, store.reads)
	}
}

// genCatalog is a catalog that counts its reads and says when it changed.
type genCatalog struct {
	s     *flashsale.Sale
	gen   uint64
	reads int
}

func (c *genCatalog) BySKU(context.Context, string) (*flashsale.Sale, error) {
	c.reads++
	return c.s, nil
}

func (c *genCatalog) Generation() uint64 { return c.gen }

// A fresh snapshot answers a poll without a catalog read while the
// catalog's generation holds; a change there (a pause made here) is seen
// by the very next poll, not a TTL later.
func TestSnapshotSkipsUnchangedCatalog(t *testing.T) {
	ctx := context.Background()
	clock := testenv.NewClock(opens)
	sale := &flashsale.Sale{ID: "sale_g", SKU: "g", OpensAt: opens, State: flashsale.SaleOpen, Epoch: 1}
	cat := &genCatalog{s: sale, gen: 7}
	gate := &snapGate{snap: flashsale.GateSnapshot{Loaded: true, Counter: 5, Epoch: 1}}
	o := &OriginSnapshots{Catalog: cat, Gate: gate, Store: &totalsStore{}, Queue: memory.NewQueue(), Now: clock.Now}
	first, err := o.Snapshot(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if snap, err := o.Snapshot(ctx, "g"); err != nil || snap != first {
			t.Fatalf("poll got a new snapshot (%v) with nothing changed", err)
		}
	}
	if cat.reads != 1 {
		t.Fatalf("%d catalog reads for six polls of an unchanged catalog, want 1", cat.reads)
	}

	paused := *sale
	paused.State = flashsale.SalePaused
	cat.s, cat.gen = &paused, 8
	snap, err := o.Snapshot(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Sale.State != flashsale.SalePaused {
		t.Fatalf("poll after a pause sees state %v", snap.Sale.State)
	}

	// Past the TTL a snapshot is rebuilt, generation or not.
	clock.Advance(time.Second)
	reads := cat.reads
	if _, err := o.Snapshot(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if cat.reads != reads+1 {
		t.Fatalf("a stale snapshot was served without reading the catalog")
	}
}
