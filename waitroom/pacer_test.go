package waitroom

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/memory"
)

type fixedGate struct{ snap flashsale.GateSnapshot }

func (g *fixedGate) Snapshot(context.Context, string) (flashsale.GateSnapshot, error) {
	return g.snap, nil
}

type saleList []*flashsale.Sale

func (s saleList) Active(context.Context) ([]*flashsale.Sale, error) { return s, nil }

var opens = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

func pacerRig(t *testing.T, rate int, counter int64, waiting int) (*Pacer, *memory.Queue, *fixedGate, *testenv.Clock, *flashsale.Sale) {
	t.Helper()
	clock := testenv.NewClock(opens)
	q := memory.NewQueue()
	sale := &flashsale.Sale{ID: "sale_p", SKU: "p", OpensAt: opens, AdmissionPerSecond: rate, State: flashsale.SaleOpen}
	for i := 0; i < waiting; i++ {
		if _, _, err := q.Join(context.Background(), sale.ID, fmt.Sprintf("u%d", i), opens); err != nil {
			t.Fatal(err)
		}
	}
	g := &fixedGate{snap: flashsale.GateSnapshot{Loaded: true, Counter: counter}}
	p := NewPacer(PacerConfig{Queue: q, Gate: g, Sales: saleList{sale}, Now: clock.Now, Tick: 250 * time.Millisecond,
		TargetLatency: 100 * time.Millisecond, Overbook: 2, AdmissionTTL: 30 * time.Second})
	return p, q, g, clock, sale
}

func (p *Pacer) tickAt(t *testing.T, clock *testenv.Clock) {
	t.Helper()
	clock.Advance(250 * time.Millisecond)
	if err := p.TickOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestPacerBacksOffAndRecovers: when the purchase path slows down,
// admissions fall (the rate halves each slow tick), and once it is fast
// again they climb back to the sale's ceiling.
func TestPacerBacksOffAndRecovers(t *testing.T) {
	p, q, _, clock, sale := pacerRig(t, 1000, 1_000_000, 1_000_000)
	ctx := context.Background()
	if err := p.TickOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ { // healthy: climbs to the ceiling
		p.Observe(sale.ID, 20*time.Millisecond, false)
		p.tickAt(t, clock)
	}
	st, _ := p.State(sale.ID)
	if st.Rate != 1000 || !st.Healthy {
		t.Fatalf("after a healthy run: %+v, want the ceiling 1000", st)
	}
	admitted := func() int64 { n, _ := q.Admitted(ctx, sale.ID); return n }
	perTick := func() int64 { before := admitted(); p.tickAt(t, clock); return admitted() - before }
	fast := perTick()

	var rates []float64
	for i := 0; i < 4; i++ { // the path slows past the target latency
		p.Observe(sale.ID, 400*time.Millisecond, false)
		p.tickAt(t, clock)
		st, _ := p.State(sale.ID)
		rates = append(rates, st.Rate)
	}
	if fmt.Sprint(rates) != "[500 250 125 62.5]" {
		t.Fatalf("rates while slow %v, want halving", rates)
	}
	p.Observe(sale.ID, 400*time.Millisecond, false)
	slow := perTick()
	if slow*4 > fast {
		t.Fatalf("admissions per tick fell only from %d to %d", fast, slow)
	}
	// Errors count as struggling too.
	for i := 0; i < 10; i++ {
		p.Observe(sale.ID, time.Millisecond, i < 2)
	}
	p.tickAt(t, clock)
	if st, _ := p.State(sale.ID); st.Healthy {
		t.Fatal("20% failed reserves counted as healthy")
	}
	for i := 0; i < 12; i++ { // recovery
		p.Observe(sale.ID, 10*time.Millisecond, false)
		p.tickAt(t, clock)
	}
	if st, _ := p.State(sale.ID); st.Rate != 1000 {
		t.Fatalf("after recovering: rate %v, want 1000", st.Rate)
	}
	if back := perTick(); back < fast*9/10 {
		t.Fatalf("admissions per tick recovered to %d of %d", back, fast)
	}
}

// TestPacerIsInventoryAware: outstanding admissions stay within Overbook
// times the units left; none are given once the counter is gone; a hold
// coming back lets more in; and admissions nobody uses lapse after
// AdmissionTTL, so abandoned places do not stall the queue.
func TestPacerIsInventoryAware(t *testing.T) {
	p, q, g, clock, sale := pacerRig(t, 1000, 10, 100_000)
	ctx := context.Background()
	admitted := func() int64 { n, _ := q.Admitted(ctx, sale.ID); return n }
	p.TickOnce(ctx)
	first := admitted()
	if first != 20 {
		t.Fatalf("10 units left, overbook 2: admitted %d, want 20", first)
	}
	// Every admitted shopper collects the admission; none has reserved yet.
	q.Add(ctx, sale.ID, CounterClaims, first)
	p.tickAt(t, clock)
	if admitted() != first {
		t.Fatalf("admitted %d more with 20 outstanding for 10 units", admitted()-first)
	}
	// Ten reserve (the gate decides them): ten places free up.
	q.Add(ctx, sale.ID, CounterAttempts, 10)
	g.snap.Counter = 0 // and they took the last units
	p.tickAt(t, clock)
	if admitted() != first {
		t.Fatal("admitted more with no units left")
	}
	g.snap.Counter = 1 // a hold expires and returns a unit
	p.tickAt(t, clock)
	if got := admitted() - first; got != 0 {
		// 10 outstanding, capacity 2*1-10 < 0: still none.
		t.Fatalf("admitted %d with 10 still outstanding for 1 unit", got)
	}
	// The ten who collected an admission and never reserved lapse.
	clock.Advance(31 * time.Second)
	p.tickAt(t, clock)
	if got := admitted() - first; got != 2 {
		t.Fatalf("after the unused admissions lapsed: admitted %d more, want 2 (one unit, overbook 2)", got)
	}
	st, _ := p.State(sale.ID)
	if st.Capacity < 0 || st.Outstanding != 0 {
		t.Fatalf("state %+v", st)
	}
}

// Places whose shoppers stopped polling never collect their admission, so
// they never count as outstanding: the queue moves past them at the pace.
func TestPacerMovesPastAbandonedPlaces(t *testing.T) {
	p, q, _, clock, sale := pacerRig(t, 100, 100, 10_000)
	ctx := context.Background()
	p.TickOnce(ctx)
	for i := 0; i < 40; i++ { // ten seconds, nobody collects anything
		p.tickAt(t, clock)
	}
	// Half the ceiling to start, climbing to 100/s: about 1,000 in 10s.
	if n, _ := q.Admitted(ctx, sale.ID); n < 900 {
		t.Fatalf("admitted up to %d after 10s at up to 100/s with every place abandoned", n)
	}
}

// The pacer never admits places nobody has taken yet, so a burst of
// arrivals is paced rather than let in at once.
func TestPacerAdmitsOnlyIssuedPlaces(t *testing.T) {
	p, q, _, clock, sale := pacerRig(t, 1000, 1000, 3)
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		p.tickAt(t, clock)
	}
	if n, _ := q.Admitted(ctx, sale.ID); n != 3 {
		t.Fatalf("admitted up to %d with 3 places taken", n)
	}
}
