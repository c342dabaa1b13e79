package memory

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/gatetest"
)

func TestGate(t *testing.T) {
	gatetest.Exercise(t, gatetest.Harness{
		New: func(t *testing.T, now func() time.Time) flashsale.GateAdmin {
			return New(Config{Now: now})
		},
		Tamper: func(t *testing.T, g flashsale.GateAdmin, saleID string, delta int64) {
			if err := g.(*Gate).Adjust(saleID, delta, "fault-drill"); err != nil {
				t.Fatalf("Adjust: %v", err)
			}
		},
	})
}

func request(saleID string, n int, now time.Time) flashsale.GateReserve {
	return flashsale.GateReserve{
		SaleID:         saleID,
		ReservationID:  fmt.Sprintf("res-%d", n),
		UserID:         fmt.Sprintf("user-%d", n),
		Quantity:       1,
		AdmissionID:    fmt.Sprintf("adm-%d", n),
		Epoch:          1,
		IdempotencyKey: fmt.Sprintf("key-%d", n),
		RequestHash:    "h",
		Now:            now,
	}
}

func TestAdjustIsAuditedDrift(t *testing.T) {
	ctx := context.Background()
	clock := gatetest.NewClock()
	g := New(Config{Now: clock.Now})
	if err := g.Adjust("sale_x", 1, "drill"); !errors.Is(err, flashsale.ErrNotLoaded) {
		t.Fatalf("Adjust before Load = %v; want ErrNotLoaded", err)
	}
	if _, err := g.Load(ctx, "sale_x", 10, 1, "test"); err != nil {
		t.Fatal(err)
	}
	if err := g.Adjust("sale_x", 2, "drill"); err != nil {
		t.Fatal(err)
	}
	s, _ := g.Snapshot(ctx, "sale_x")
	if s.Counter != 12 || s.Drift() != 2 || s.AuditedCounter != 12 || s.Won != 0 || s.Restocked != 0 {
		t.Fatalf("after Adjust(+2): %+v", s)
	}
	a, _ := g.Audit(ctx, "sale_x", 1)
	if len(a) != 1 || a[0].Op != "adjust" || a[0].Source != "drill" || a[0].Delta != 2 || a[0].Counter != 12 {
		t.Fatalf("audit of Adjust: %+v", a)
	}
}

func TestAuditLimitKeepsNewest(t *testing.T) {
	ctx := context.Background()
	g := New(Config{AuditLimit: 4})
	g.Load(ctx, "s", 100, 1, "test")
	now := time.Now()
	for i := range 10 {
		if out, err := g.Reserve(ctx, request("s", i, now)); err != nil || out.Verdict != flashsale.VerdictWon {
			t.Fatalf("reserve %d: %v, %v", i, out.Verdict, err)
		}
	}
	a, _ := g.Audit(ctx, "s", 100)
	if len(a) != 4 {
		t.Fatalf("audit kept %d entries; want 4", len(a))
	}
	for i, e := range a {
		// 11 entries were written (a load and 10 reserves); the newest 4
		// are seq 8..11, the reserves of res-6..res-9.
		if e.Seq != int64(8+i) || e.ReservationID != fmt.Sprintf("res-%d", 6+i) {
			t.Fatalf("audit[%d] = %+v", i, e)
		}
	}
	if two, _ := g.Audit(ctx, "s", 2); len(two) != 2 || two[1].Seq != 11 {
		t.Fatalf("Audit(2) = %+v", two)
	}
}

// TestFilterGrows checks that the fast path's filter is rebuilt larger when
// a sale takes far more keys than it was sized for, and still never hides
// a key.
func TestFilterGrows(t *testing.T) {
	ctx := context.Background()
	g := New(Config{})
	g.Load(ctx, "s", 100_000, 1, "test")
	small := g.lookup("s").filter.Load()
	g.Drop(ctx, "s")
	g.Load(ctx, "s", 0, 1, "test")
	g.Adjust("s", 50_000, "drill")
	s := g.lookup("s")
	// Make the bookkeeping agree with the counter, as a load of 50,000
	// would, so the sale sells (a drifted counter sells nothing), while
	// the filter keeps the size it had for 0 units.
	s.mu.Lock()
	s.seq.Add(1)
	s.initial += 50_000
	s.markDrift()
	s.seq.Add(1)
	s.mu.Unlock()
	first := s.filter.Load()
	if len(first.words) >= len(small.words) {
		t.Fatalf("a filter for 0 units (%d words) is not smaller than one for 100,000 (%d)", len(first.words), len(small.words))
	}
	now := time.Now()
	const n = 20_000
	for i := range n {
		if out, _ := g.Reserve(ctx, request("s", i, now)); out.Verdict != flashsale.VerdictWon {
			t.Fatalf("reserve %d: %v", i, out.Verdict)
		}
	}
	grown := s.filter.Load()
	if len(grown.words) <= len(first.words) {
		t.Fatalf("filter stayed at %d words after %d keys", len(grown.words), 2*n)
	}
	// Sold out now: every earlier key still replays rather than reading
	// as sold out.
	g.Adjust("s", -int64(50_000-n), "drill")
	for i := 0; i < n; i += 997 {
		r := request("s", i, now)
		r.ReservationID = "retry"
		if out, _ := g.Reserve(ctx, r); out.Verdict != flashsale.VerdictReplayed {
			t.Fatalf("replay %d = %v", i, out.Verdict)
		}
	}
}

// TestSoldOutAllocatesNothing pins the cheapest rejection at zero
// allocations: it is the branch that runs for almost every shopper.
func TestSoldOutAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	g := New(Config{})
	g.Load(ctx, "s", 0, 1, "test")
	r := request("s", 1, time.Now())
	allocs := testing.AllocsPerRun(1000, func() {
		if out, _ := g.Reserve(ctx, r); out.Verdict != flashsale.VerdictSoldOut {
			t.Fatalf("verdict %v", out.Verdict)
		}
	})
	if allocs != 0 {
		t.Fatalf("a sold-out reserve allocates %v times", allocs)
	}
}

// TestWinAllocatesNothing pins a win at zero allocations while the sale
// sells the stock it was loaded with: the hold goes into the book's slab,
// the tables and the audit log were sized at load.
func TestWinAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	const runs = 500
	g := New(Config{})
	g.Load(ctx, "s", runs+1, 1, "test")
	reqs := make([]flashsale.GateReserve, runs+1) // AllocsPerRun warms up once
	now := time.Now()
	for i := range reqs {
		reqs[i] = request("s", i, now)
	}
	i := 0
	allocs := testing.AllocsPerRun(runs, func() {
		if out, _ := g.Reserve(ctx, reqs[i]); out.Verdict != flashsale.VerdictWon {
			t.Fatalf("reserve %d: %v", i, out.Verdict)
		}
		i++
	})
	if allocs != 0 {
		t.Fatalf("a win allocates %v times", allocs)
	}
}

// TestFastPathNeverHidesAKey drives the lock-free path with keys the sale
// holds, many times, while the sale is sold out: each must replay.
func TestFastPathNeverHidesAKey(t *testing.T) {
	ctx := context.Background()
	g := New(Config{})
	g.Load(ctx, "s", 500, 1, "test")
	now := time.Now()
	for i := range 500 {
		g.Reserve(ctx, request("s", i, now))
	}
	for i := range 500 {
		r := request("s", i, now)
		r.ReservationID = "retry"
		if out, _ := g.Reserve(ctx, r); out.Verdict != flashsale.VerdictReplayed {
			t.Fatalf("key %d: %v", i, out.Verdict)
		}
		if _, found, _ := g.Lookup(ctx, "s", r.UserID, r.IdempotencyKey); !found {
			t.Fatalf("Lookup of key %d found nothing", i)
		}
	}
}

// TestTableCollisions forces keys onto one hash: the table must keep them
// apart by the keys themselves, through deletes and growth.
func TestTableCollisions(t *testing.T) {
	var tb table[*flashsale.Hold]
	tb.init(0, holdHasID)
	const h = 12345
	holds := make([]*flashsale.Hold, 50)
	for i := range holds {
		holds[i] = &flashsale.Hold{ReservationID: fmt.Sprint("r", i)}
		tb.put(h, key{a: holds[i].ReservationID}, holds[i])
	}
	// Plenty of other keys, so the table grows while colliding keys sit
	// in it.
	for i := range 1000 {
		tb.put(uint64(1_000_000+i), key{a: fmt.Sprint("o", i)}, &flashsale.Hold{ReservationID: fmt.Sprint("o", i)})
	}
	for i := 0; i < len(holds); i += 2 {
		tb.del(h, key{a: holds[i].ReservationID})
	}
	if tb.len() != 1000+len(holds)/2 {
		t.Fatalf("len = %d", tb.len())
	}
	for i, want := range holds {
		got, ok := tb.get(h, key{a: want.ReservationID})
		if deleted := i%2 == 0; ok == deleted || (ok && got != want) {
			t.Fatalf("key %d: got %v, %v", i, got, ok)
		}
	}
	// A deleted key comes back, once.
	tb.put(h, key{a: "r0"}, holds[0])
	tb.put(h, key{a: "r0"}, holds[0])
	if got, ok := tb.get(h, key{a: "r0"}); !ok || got != holds[0] || tb.len() != 1000+len(holds)/2+1 {
		t.Fatalf("re-put: %v, %v, len %d", got, ok, tb.len())
	}
	n := 0
	tb.each(func(uint64, *flashsale.Hold) { n++ })
	if n != tb.len() {
		t.Fatalf("each visited %d of %d", n, tb.len())
	}
}

// TestQuickPathYieldsToWriters: while a writer is inside its write section
// (seq odd), the lock-free path must not answer.
func TestQuickPathYieldsToWriters(t *testing.T) {
	ctx := context.Background()
	g := New(Config{})
	g.Load(ctx, "s", 0, 1, "test")
	s := g.lookup("s")
	r := request("s", 1, time.Now())
	_, hIdem := s.hashKey(r.UserID, r.IdempotencyKey)
	if _, ok := s.quickReserve(&r, hIdem, s.hash(r.AdmissionID)); !ok {
		t.Fatal("the quick path did not answer a plain sold-out request")
	}
	s.seq.Add(1)
	defer s.seq.Add(1)
	if _, ok := s.quickReserve(&r, hIdem, s.hash(r.AdmissionID)); ok {
		t.Fatal("the quick path answered during a write")
	}
	if s.quickUnknown(hIdem) {
		t.Fatal("the quick lookup answered during a write")
	}
}

// TestAuditMixesWinsAndOtherEntries checks that a win's entry, kept by its
// hold, reads back as the same entry as any other, in order and numbered,
// across the ring's wrap.
func TestAuditMixesWinsAndOtherEntries(t *testing.T) {
	ctx := context.Background()
	clock := gatetest.NewClock()
	g := New(Config{Now: clock.Now, AuditLimit: 5})
	g.Load(ctx, "s", 10, 1, "loader")
	var want []flashsale.AuditEntry
	for i := range 3 {
		clock.Advance(time.Millisecond)
		r := request("s", i, clock.Now())
		r.Quantity = i + 1
		out, err := g.Reserve(ctx, r)
		if err != nil || out.Verdict != flashsale.VerdictWon {
			t.Fatalf("reserve %d: %v, %v", i, out.Verdict, err)
		}
		want = append(want, flashsale.AuditEntry{At: r.Now, Op: "reserve", Source: "reserve", Delta: -int64(r.Quantity), Counter: out.Remaining, ReservationID: r.ReservationID})
	}
	clock.Advance(time.Millisecond)
	if moved, err := g.Restock(ctx, "s", "res-1", "sweeper"); !moved || err != nil {
		t.Fatalf("Restock = %v, %v", moved, err)
	}
	want = append(want, flashsale.AuditEntry{At: clock.Now(), Op: "restock", Source: "sweeper", Delta: 2, Counter: 6, ReservationID: "res-1"})
	g.SetPaused(ctx, "s", true, "operator")
	want = append(want, flashsale.AuditEntry{At: clock.Now(), Op: "pause", Source: "operator", Counter: 6})
	// Six entries through a ring of five: only the load is gone.
	got, _ := g.Audit(ctx, "s", 100)
	if len(got) != len(want) {
		t.Fatalf("Audit = %d entries %+v; want %d", len(got), got, len(want))
	}
	for i := range got {
		w := want[i]
		w.Seq = int64(2 + i)
		if !got[i].At.Equal(w.At) {
			t.Fatalf("entry %d at %v; want %v", i, got[i].At, w.At)
		}
		got[i].At, w.At = time.Time{}, time.Time{}
		if got[i] != w {
			t.Fatalf("entry %d = %+v; want %+v", i, got[i], w)
		}
	}
}
