package engine_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
)

// TestClosedSaleRetires checks that the gate and the queue forget a sale
// once it has been closed for RetireAfter with no hold pending, and not
// before; and
// that a shopper repeating a reserve afterwards still gets its first
// answer, from the record.
func TestClosedSaleRetires(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const after = time.Hour // shorter than the hold below
		h := newHarness(t, b, func(c *engine.Config) { c.RetireAfter = after })
		ctx := context.Background()
		closes := start.Add(10 * time.Minute)
		h.createSale("R1", map[string]any{"initialStock": 3, "holdSeconds": 2 * 3600,
			"closesAt": closes.Format(time.RFC3339)})
		sale := h.saleOf("R1")
		resAnn, _ := h.buy("R1", "ann")
		pending := h.reserve("R1", "bob", h.admit("R1", "bob"), "k-bob", nil)
		if pending.status != http.StatusCreated {
			t.Fatalf("reserve for bob: %d %s", pending.status, pending.body)
		}

		// A sale that sold nothing, closing at the same time.
		h.createSale("R2", map[string]any{"initialStock": 1, "closesAt": closes.Format(time.RFC3339)})
		empty := h.saleOf("R2")

		retire := func() []string {
			t.Helper()
			done, err := h.eng.Retirer.RetireOnce(ctx)
			if err != nil {
				t.Fatalf("retire: %v", err)
			}
			return done
		}
		loaded := func(id string) bool {
			t.Helper()
			snap, err := h.eng.Gate.Snapshot(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return snap.Loaded
		}

		// Open, then closed but not for long enough: both kept.
		for _, at := range []time.Time{start, closes.Add(after - time.Second)} {
			h.clock.Set(at)
			if done := retire(); len(done) != 0 || !loaded(sale.ID) || !loaded(empty.ID) {
				t.Fatalf("at %v: retired %v; want both sales kept", at, done)
			}
		}
		// Closed long enough: the empty sale goes; R1 stays while bob's
		// hold is pending.
		h.clock.Set(closes.Add(after))
		if done := retire(); !slices.Equal(done, []string{empty.ID}) || loaded(empty.ID) || !loaded(sale.ID) {
			t.Fatalf("with a hold pending: retired %v; want only %s", done, empty.ID)
		}
		// Bob's hold expires: R1 goes, once.
		h.clock.Set(start.Add(2*time.Hour + time.Second))
		if n, err := h.eng.Sweeper.SweepOnce(ctx); err != nil || n != 1 {
			t.Fatalf("sweep: %d units, %v; want bob's 1", n, err)
		}
		if n, err := h.eng.Queue.Len(ctx, sale.ID); err != nil || n != 2 {
			t.Fatalf("the queue gave %d places (%v); want ann's and bob's", n, err)
		}
		if done := retire(); !slices.Equal(done, []string{sale.ID}) || loaded(sale.ID) {
			t.Fatalf("retired %v; want %s", done, sale.ID)
		}
		if n, err := h.eng.Queue.Len(ctx, sale.ID); err != nil || n != 0 {
			t.Fatalf("the queue still counts %d places (%v)", n, err)
		}
		if holds, err := h.eng.Gate.Holds(ctx, sale.ID); err != nil || len(holds) != 0 {
			t.Fatalf("the gate still keeps %d holds (%v)", len(holds), err)
		}
		if done := retire(); len(done) != 0 {
			t.Fatalf("retired again: %v", done)
		}

		// Ann repeats her reserve, without an admission: the record
		// answers as the gate did.
		r := h.reserve("R1", "ann", "", "k-ann", nil)
		if r.status != http.StatusCreated || r.json(t)["reservationId"] != resAnn {
			t.Fatalf("replay after retirement: %d %s; want 201 with %s", r.status, r.body, resAnn)
		}
		if r := h.reserve("R1", "ann", "", "k-ann", map[string]any{"quantity": 1, "paymentFingerprint": "other"}); r.status != http.StatusUnprocessableEntity {
			t.Fatalf("same key, other request: %d %s; want 422", r.status, r.body)
		}
		if r := h.reserve("R1", "cat", "", "k-cat", nil); r.code() != "admission_required" {
			t.Fatalf("a new shopper: %d %s; want admission_required", r.status, r.body)
		}
		// Shoppers are told it closed.
		if r := h.do("GET", "/sale/R1", nil, nil); r.status != http.StatusOK || r.json(t)["state"] != "closed" {
			t.Fatalf("the published sale after retirement: %d %s", r.status, r.body)
		}
		if r := h.do("GET", "/sale/R1/ticket", map[string]string{"Authorization": "Bearer " + h.jwt("cat")}, nil); r.code() != "closed" {
			t.Fatalf("a ticket after retirement: %d %s; want closed", r.status, r.body)
		}
		// The operator still sees the sale and its orders.
		v := h.sale("R1")
		if v.State != flashsale.SaleClosed || v.Confirmed != 1 || v.Pending != 0 || v.Gate != "retired" {
			t.Fatalf("sale view after retirement: %+v", v)
		}
	})
}
