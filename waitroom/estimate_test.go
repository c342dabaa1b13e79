package waitroom

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/memory"
	"github.com/flashsale/flashsale/token"
)

// estimateRig is a paced sale on a virtual clock with the real pacer,
// queue, snapshots and room, polled as a crowd polls: a snapshot every
// 100ms from its creation to the last admission.
type estimateRig struct {
	t      *testing.T
	clock  *testenv.Clock
	sale   *flashsale.Sale
	queue  *memory.Queue
	pacer  *Pacer
	snaps  *OriginSnapshots
	room   *Room
	tokens *token.Keyring
	slow   bool // the purchase path is slow: every reserve takes 400ms
}

const (
	estimateRate     = 20  // the sale's admissionPerSecond
	estimateShoppers = 600 // places taken before the open
)

func newEstimateRig(t *testing.T, created time.Duration) *estimateRig {
	t.Helper()
	ctx := context.Background()
	clock := testenv.NewClock(opens.Add(-created))
	sale := &flashsale.Sale{ID: "sale_e", SKU: "e", OpensAt: opens, AdmissionPerSecond: estimateRate,
		State: flashsale.SaleScheduled, Epoch: 1, HoldSeconds: 600, PerUserLimit: 1, Fairness: flashsale.FairnessFIFO}
	q := memory.NewQueue()
	for i := 1; i <= estimateShoppers; i++ {
		if _, _, err := q.Join(ctx, sale.ID, fmt.Sprintf("u%d", i), clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	gate := &snapGate{snap: flashsale.GateSnapshot{Loaded: true, Counter: 1_000_000, Epoch: 1}}
	pacer := NewPacer(PacerConfig{Queue: q, Gate: gate, Sales: saleList{sale}, Now: clock.Now, Holder: "rig",
		Tick: 250 * time.Millisecond})
	snaps := &OriginSnapshots{Catalog: oneSale{sale}, Gate: gate, Store: &totalsStore{}, Queue: q, Pacing: pacer,
		Now: clock.Now}
	key, err := token.GenerateKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := token.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	room := New(Config{Queue: q, Tokens: keys, Snapshots: snaps, Now: clock.Now})
	return &estimateRig{t: t, clock: clock, sale: sale, queue: q, pacer: pacer, snaps: snaps, room: room, tokens: keys}
}

// step moves the clock on 100ms; the pacer ticks every 250ms once open
// (its own loop's pace), and a poll builds a snapshot.
func (g *estimateRig) step(n int) {
	g.t.Helper()
	ctx := context.Background()
	g.clock.Advance(100 * time.Millisecond)
	if n%5 == 0 || n%5 == 2 { // 250ms on average, as the pacer's loop
		if g.slow {
			g.pacer.Observe(g.sale.ID, 400*time.Millisecond, false)
		}
		if err := g.pacer.TickOnce(ctx); err != nil {
			g.t.Fatal(err)
		}
	}
	if _, err := g.snaps.Snapshot(ctx, g.sale.SKU); err != nil {
		g.t.Fatal(err)
	}
}

func (g *estimateRig) admitted() int64 {
	n, err := g.queue.Admitted(context.Background(), g.sale.ID)
	if err != nil {
		g.t.Fatal(err)
	}
	return n
}

// estimate is what the room tells the shopper at place p now: the wait,
// and when to poll again.
func (g *estimateRig) estimate(p int64) (wait, retryAfter time.Duration, state State) {
	g.t.Helper()
	tk := g.tokens.SignTicket(token.Ticket{UserID: fmt.Sprintf("u%d", p), SaleID: g.sale.ID, Position: p,
		Arrival: g.clock.Now()})
	st, err := g.room.Status(context.Background(), g.sale.SKU, tk)
	if err != nil {
		g.t.Fatal(err)
	}
	snap, err := g.snaps.Snapshot(context.Background(), g.sale.SKU)
	if err != nil {
		g.t.Fatal(err)
	}
	// The ticket answer's estimate, which the status also gives once open.
	_, wait = g.room.ahead(snap, p, g.clock.Now())
	if st.State == StateWaiting && st.EstimatedWait != wait {
		g.t.Fatalf("the status says %v, the ticket %v", st.EstimatedWait, wait)
	}
	return wait, st.RetryAfter, st.State
}

// TestWaitEstimatesOverASalesLife runs sales through their lives (created
// an hour, a minute, eight seconds before the open, or at it; the pace
// halved by the operator or by the pacer as the purchase path slows;
// paused and resumed), records what shoppers at several places are told
// at moments along the way, then compares it with when each place was in
// fact admitted. Every estimate is at least the truth (less a tick or
// two), never more than the published margin above it (plus a second or
// two of rounding), and Retry-After follows the distance to the front.
func TestWaitEstimatesOverASalesLife(t *testing.T) {
	type event struct {
		at time.Duration // from the open
		do func(*estimateRig)
	}
	pause := func(g *estimateRig) { g.sale.State = flashsale.SalePaused }
	resume := func(g *estimateRig) { g.sale.State = flashsale.SaleOpen }
	for _, c := range []struct {
		name    string
		created time.Duration // before the open
		events  []event
		checks  []time.Duration // from the open
	}{
		{name: "created an hour before", created: time.Hour,
			checks: []time.Duration{-30 * time.Minute, -8 * time.Second, 0, 500 * time.Millisecond, 3 * time.Second, 10 * time.Second}},
		{name: "created a minute before", created: time.Minute,
			checks: []time.Duration{-30 * time.Second, 0, 500 * time.Millisecond, 5 * time.Second}},
		{name: "created eight seconds before", created: 8 * time.Second,
			checks: []time.Duration{-5 * time.Second, 500 * time.Millisecond, 2 * time.Second}},
		{name: "created at the open", created: 0,
			checks: []time.Duration{500 * time.Millisecond, 4 * time.Second}},
		{name: "pace halved by the operator", created: time.Hour,
			events: []event{{5 * time.Second, func(g *estimateRig) { g.sale.AdmissionPerSecond = estimateRate / 2 }}},
			checks: []time.Duration{5500 * time.Millisecond, 8 * time.Second, 15 * time.Second}},
		{name: "pacer halving as the purchase path slows", created: time.Minute,
			events: []event{{5 * time.Second, func(g *estimateRig) { g.slow = true }}},
			checks: []time.Duration{6 * time.Second, 9 * time.Second, 30 * time.Second}},
		{name: "paused and resumed", created: time.Hour,
			events: []event{{5 * time.Second, pause}, {65 * time.Second, resume}},
			checks: []time.Duration{65500 * time.Millisecond, 68 * time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newEstimateRig(t, c.created)
			type told struct {
				at          time.Duration
				place       int64
				wait, retry time.Duration
				state       State
			}
			var said []told
			admittedAt := map[int64]time.Duration{} // place -> when it was admitted
			var last int64
			events, checks := c.events, c.checks
			for n := 0; last < estimateShoppers; n++ {
				now := g.clock.Now().Sub(opens)
				if now > 20*time.Minute {
					t.Fatalf("only %d of %d admitted after 20 minutes", last, estimateShoppers)
				}
				for len(events) > 0 && now >= events[0].at {
					events[0].do(g)
					events = events[1:]
				}
				for len(checks) > 0 && now >= checks[0] {
					for _, p := range []int64{1, 10, 100, 300, estimateShoppers} {
						if p > last {
							wait, retry, state := g.estimate(p)
							said = append(said, told{now, p, wait, retry, state})
						}
					}
					checks = checks[1:]
				}
				g.step(n)
				for up := g.admitted(); last < up; last++ {
					admittedAt[last+1] = g.clock.Now().Sub(opens)
				}
			}
			const slack = 2 * time.Second
			for _, s := range said {
				truth := admittedAt[s.place] - s.at
				if s.state != StateWaiting && s.state != StateScheduled {
					t.Errorf("at %v place %d: state %s", s.at, s.place, s.state)
				}
				if s.wait+slack < truth {
					t.Errorf("at %v place %d was told %v, but waited %v", s.at, s.place, s.wait, truth)
				}
				if limit := time.Duration(float64(truth)*WaitMargin) + slack; s.wait > limit {
					t.Errorf("at %v place %d was told %v, more than %v above the %v it waited", s.at, s.place, s.wait,
						WaitMargin, truth)
				}
				if limit := max(time.Second, truth/8); s.retry > limit {
					t.Errorf("at %v place %d was asked back in %v, its turn came in %v", s.at, s.place, s.retry, truth)
				}
			}
			if len(said) == 0 {
				t.Fatal("nobody was asked")
			}
		})
	}
}

// TestAdmissionRate: estimates use the plan (the sale's rate, or the
// pacer's while it holds back), the measure where it is clearly slower,
// and never less than the pacer's floor, however little was admitted.
func TestAdmissionRate(t *testing.T) {
	snap := func(ceiling int, pace, measured float64) *Snapshot {
		return &Snapshot{Sale: SaleInfo{AdmissionPerSecond: ceiling}, Pace: pace, Rate: measured}
	}
	for _, c := range []struct {
		snap       *Snapshot
		beforeOpen bool
		want       float64
	}{
		{snap(100, 0, 0), false, 100},   // not measured yet: the plan
		{snap(100, 0, 95), false, 100},  // the plan, seen through the ticks
		{snap(100, 0, 40), false, 40},   // the stock holds admissions back
		{snap(100, 0, 0.001), false, 2}, // never under the floor
		{snap(100, 25, 100), false, 25}, // the pacer holds back
		{snap(100, 0, 40), true, 100},   // before the open, the plan alone
		{snap(100, 500, 0), false, 100}, // a pace above the sale's rate is no pace
		{snap(3, 0, 0.0001), false, 1},  // a floor of one a second
		{snap(0, 0, 0), false, 0},       // unpaced: no wait to estimate
	} {
		if got := admissionRate(c.snap, c.beforeOpen); got != c.want {
			t.Errorf("%+v before the open %v: %v, want %v", *c.snap, c.beforeOpen, got, c.want)
		}
	}
}

// TestPacerAfterAPause: the time a sale spent paused is not owed to the
// queue: the first tick after the resume admits a second's worth, not
// the minute's.
func TestPacerAfterAPause(t *testing.T) {
	p, q, _, clock, sale := pacerRig(t, 100, 1_000_000, 100_000)
	ctx := context.Background()
	admitted := func() int64 { n, _ := q.Admitted(ctx, sale.ID); return n }
	for range 8 {
		p.tickAt(t, clock)
	}
	sale.State = flashsale.SalePaused
	clock.Advance(time.Minute)
	if err := p.TickOnce(ctx); err != nil {
		t.Fatal(err)
	}
	before := admitted()
	sale.State = flashsale.SaleOpen
	p.tickAt(t, clock)
	if n := admitted() - before; n > 100 {
		t.Fatalf("the first tick after a minute's pause admitted %d, want at most a second's 100", n)
	}
}
