package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/restock"
)

// slowGate makes every reserve take extra time while slow is set, as a
// struggling gate does.
type slowGate struct {
	restock.Gate
	slow atomic.Bool
}

func (g *slowGate) Reserve(ctx context.Context, r flashsale.GateReserve) (flashsale.GateOutcome, error) {
	if g.slow.Load() {
		time.Sleep(300 * time.Millisecond)
	}
	return g.Gate.Reserve(ctx, r)
}

// TestAdmissionsFollowThePurchasePath: the pacer hears every reserve the
// purchase path decides; when reserves slow down, admissions fall, and
// when they are fast again, admissions recover.
func TestAdmissionsFollowThePurchasePath(t *testing.T) {
	g := &slowGate{}
	h := newHarness(t, backends[0], func(c *engine.Config) {
		c.WrapGate = func(inner restock.Gate) restock.Gate { g.Gate = inner; return g }
		c.ReserveBurst = -1
	})
	h.createSale("paced", map[string]any{"initialStock": 100000, "admissionPerSecond": 400})
	for i := 0; i < 3000; i++ {
		h.ticketOf("paced", fmt.Sprintf("q%d", i))
	}
	ctx := context.Background()
	sale := h.saleOf("paced")
	tick := func() int64 {
		before, _ := h.eng.Queue.Admitted(ctx, sale.ID)
		h.clock.Advance(250 * time.Millisecond)
		if err := h.eng.Pacer.TickOnce(ctx); err != nil {
			t.Fatal(err)
		}
		after, _ := h.eng.Queue.Admitted(ctx, sale.ID)
		return after - before
	}
	reserves := func(n int, tag string) {
		for i := 0; i < n; i++ {
			u := fmt.Sprintf("%s-%d", tag, i)
			if r := h.reserve("paced", u, h.admitPaused("paced", u), "k", nil); r.status != 201 {
				t.Fatalf("reserve: %d %s", r.status, r.body)
			}
		}
	}
	for i := 0; i < 8; i++ {
		reserves(2, fmt.Sprint("fast", i))
		tick()
	}
	fast := tick()
	g.slow.Store(true)
	reserves(2, "slow")
	slowTick := tick()
	reserves(2, "slower")
	slower := tick()
	g.slow.Store(false)
	if !(slower < slowTick && slowTick < fast) {
		t.Fatalf("admissions per tick: %d fast, then %d and %d while reserves took 300ms; want falling", fast, slowTick, slower)
	}
	var recovered int64
	for i := 0; i < 12; i++ {
		reserves(1, fmt.Sprint("again", i))
		recovered = tick()
	}
	if recovered < fast*9/10 {
		t.Fatalf("admissions per tick recovered to %d of %d", recovered, fast)
	}
	if st, _ := h.eng.Pacer.State(sale.ID); !st.Healthy || st.Rate != 400 {
		t.Fatalf("pacer after recovering: %+v", st)
	}
}
