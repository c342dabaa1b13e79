package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/restock"
)

// buy takes a shopper from the waiting room to a confirmed order and
// returns the reservation and order ids.
func (h *harness) buy(sku, user string) (resID, orderID string) {
	h.t.Helper()
	r := h.reserve(sku, user, h.admit(sku, user), "k-"+user, nil)
	if r.status != http.StatusCreated {
		h.t.Fatalf("reserve for %s: %d %s", user, r.status, r.body)
	}
	resID = r.json(h.t)["reservationId"].(string)
	c := h.do("POST", "/reservations/"+resID+"/confirm", map[string]string{"Authorization": "Bearer " + h.jwt(user)},
		map[string]string{"paymentRef": "pay-" + user})
	if c.status != http.StatusOK {
		h.t.Fatalf("confirm for %s: %d %s", user, c.status, c.body)
	}
	return resID, c.json(h.t)["orderId"].(string)
}

// events returns the types of the sale's events, oldest first.
func (h *harness) events(sku string) []flashsale.EventType {
	h.t.Helper()
	evs, err := h.eng.Store.SaleEvents(context.Background(), h.saleOf(sku).ID, 10000)
	if err != nil {
		h.t.Fatal(err)
	}
	out := make([]flashsale.EventType, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func count(types []flashsale.EventType, typ flashsale.EventType) int {
	n := 0
	for _, t := range types {
		if t == typ {
			n++
		}
	}
	return n
}

// TestOrderVersionConflict: the operator's order routes need If-Match (428
// without it), answer 412 version_conflict for a stale version and change
// nothing then: not the order, not its reservation, not the counter, no
// audit row, no event.
func TestOrderVersionConflict(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("cap", map[string]any{"initialStock": 3})
		resID, orderID := h.buy("cap", "alice")
		before := h.events("cap")
		counter, totals := h.exact("cap")

		for _, action := range []string{"ship", "cancel", "refund"} {
			path := "/admin/orders/" + orderID + "/" + action
			if r := h.do("POST", path, nil, nil); r.status != http.StatusPreconditionRequired || r.code() != "precondition_required" {
				t.Fatalf("%s without If-Match: %d %s", action, r.status, r.body)
			}
			r := h.do("POST", path, map[string]string{"If-Match": `"2"`}, map[string]string{"reason": "stale"})
			if r.status != http.StatusPreconditionFailed || r.code() != "version_conflict" {
				t.Fatalf("%s at a stale version: %d %s", action, r.status, r.body)
			}
		}
		if r := h.do("POST", "/admin/orders/ord_missing/cancel", map[string]string{"If-Match": "1"}, nil); r.status != http.StatusNotFound {
			t.Fatalf("cancel a missing order: %d %s", r.status, r.body)
		}

		o, err := h.eng.Store.Order(context.Background(), orderID)
		if err != nil || o.State != flashsale.OrderConfirmed || o.Version != 1 {
			t.Fatalf("order after the conflicts: %+v, %v", o, err)
		}
		if r, _ := h.eng.Store.Reservation(context.Background(), resID); r.State != flashsale.ReservationConfirmed {
			t.Fatalf("reservation after the conflicts: %s", r.State)
		}
		if hist, _ := h.eng.Store.OrderHistory(context.Background(), orderID); len(hist) != 1 {
			t.Fatalf("audit rows after the conflicts: %+v", hist)
		}
		if after := h.events("cap"); len(after) != len(before) {
			t.Fatalf("events after the conflicts: %v, before %v", after, before)
		}
		if c, tt := h.exact("cap"); c != counter || tt != totals {
			t.Fatalf("counter %d totals %+v after the conflicts, want %d %+v", c, tt, counter, totals)
		}
	})
}

// TestCancelAndRefundRestockOnce: cancelling an order, and refunding a
// shipped one, each return their units to the gate once; the answer is the
// order at its new version; the audit trail and the events say what
// happened.
func TestCancelAndRefundRestockOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("mug", map[string]any{"initialStock": 3})
		_, cancelled := h.buy("mug", "alice")
		_, refunded := h.buy("mug", "bob")
		if c, _ := h.exact("mug"); c != 1 {
			t.Fatalf("counter %d after two orders, want 1", c)
		}

		r := h.do("POST", "/admin/orders/"+cancelled+"/cancel", map[string]string{"If-Match": "1", "X-Operator": "ops.alice"},
			map[string]string{"reason": "payment reversed"})
		if r.status != http.StatusOK || r.json(t)["state"] != "cancelled" || r.json(t)["version"] != float64(2) || r.header.Get("ETag") != `"2"` {
			t.Fatalf("cancel: %d %s (ETag %s)", r.status, r.body, r.header.Get("ETag"))
		}
		if r := h.do("POST", "/admin/orders/"+cancelled+"/cancel", map[string]string{"If-Match": "2"}, nil); r.status != http.StatusConflict || r.code() != "invalid_state" {
			t.Fatalf("cancel twice: %d %s", r.status, r.body)
		}
		if r := h.do("POST", "/admin/orders/"+refunded+"/ship", map[string]string{"If-Match": "1"}, nil); r.status != http.StatusOK {
			t.Fatalf("ship: %d %s", r.status, r.body)
		}
		if r := h.do("POST", "/admin/orders/"+refunded+"/refund", map[string]string{"If-Match": "2"}, nil); r.status != http.StatusOK || r.json(t)["state"] != "refunded" {
			t.Fatalf("refund: %d %s", r.status, r.body)
		}
		counter, totals := h.exact("mug")
		if counter != 3 || totals.Cancelled != 2 || totals.Confirmed != 0 {
			t.Fatalf("after cancel and refund: counter %d totals %+v, want 3 and both cancelled", counter, totals)
		}

		hist := h.do("GET", "/admin/orders/"+cancelled+"/history", nil, nil).json(t)["history"].([]any)
		last := hist[len(hist)-1].(map[string]any)
		if len(hist) != 2 || last["from"] != "confirmed" || last["to"] != "cancelled" || last["actor"] != "operator:ops.alice" ||
			last["reason"] != "payment reversed" || last["eventId"] == "" {
			t.Fatalf("history: %v", hist)
		}
		types := h.events("mug")
		for typ, want := range map[flashsale.EventType]int{
			flashsale.EventOrderConfirmed: 2, flashsale.EventOrderCancelled: 1, flashsale.EventOrderShipped: 1,
			flashsale.EventOrderRefunded: 1, flashsale.EventReservationCancelled: 2, flashsale.EventReservationCreated: 2,
		} {
			if got := count(types, typ); got != want {
				t.Errorf("%d %s events, want %d (all: %v)", got, typ, want, types)
			}
		}
	})
}

// restockFails is a gate whose Restock fails while armed, as a gate that
// stops answering between the record's decision and the restock would.
type restockFails struct {
	restock.Gate
	armed atomic.Bool
}

func (g *restockFails) Restock(ctx context.Context, saleID, reservationID, source string) (bool, error) {
	if g.armed.Load() {
		return false, errors.New("connection reset (fault drill)")
	}
	return g.Gate.Restock(ctx, saleID, reservationID, source)
}

// TestCancelRestockCutBetweenTheSteps: the record cancels the order (and
// ends its reservation) but the gate's restock fails; the operator is still
// answered 200, and the sweeper's reconciler finishes the restock, once.
func TestCancelRestockCutBetweenTheSteps(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		g := &restockFails{}
		h := newHarness(t, b, func(c *engine.Config) {
			c.WrapGate = func(inner restock.Gate) restock.Gate { g.Gate = inner; return g }
		})
		h.createSale("lamp", map[string]any{"initialStock": 2})
		_, orderID := h.buy("lamp", "alice")
		g.armed.Store(true)
		if r := h.do("POST", "/admin/orders/"+orderID+"/cancel", map[string]string{"If-Match": "1"}, nil); r.status != http.StatusOK {
			t.Fatalf("cancel with the restock failing: %d %s", r.status, r.body)
		}
		g.armed.Store(false)
		sale := h.saleOf("lamp")
		snap, _ := h.eng.Gate.Snapshot(context.Background(), sale.ID)
		if snap.Counter != 1 {
			t.Fatalf("counter %d before the reconciler, want 1 (the restock was cut)", snap.Counter)
		}
		for range 2 {
			if _, err := h.eng.Sweeper.Reconcile(context.Background(), sale); err != nil {
				t.Fatal(err)
			}
		}
		if c, _ := h.exact("lamp"); c != 2 {
			t.Fatalf("counter %d after reconciling twice, want 2", c)
		}
	})
}

// TestSaleEventsFromThePurchasePath: the reserve that takes the last unit
// writes sale.sold_out with its hold; the rejections that follow write
// nothing; a unit coming back and selling out again is a second sell-out;
// an operator's pause and resume are published with the reason.
func TestSaleEventsFromThePurchasePath(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("pin", map[string]any{"initialStock": 2})
		h.buy("pin", "u1")
		h.buy("pin", "u2")
		before := len(h.events("pin"))
		var wg sync.WaitGroup
		for i := range 20 {
			user := fmt.Sprint("late", i)
			adm := h.admit("pin", user)
			wg.Go(func() {
				if r := h.reserve("pin", user, adm, "k", nil); r.status != http.StatusConflict || r.code() != "sold_out" {
					t.Errorf("reserve after the sell-out: %d %s", r.status, r.body)
				}
			})
		}
		wg.Wait()
		types := h.events("pin")
		if count(types, flashsale.EventSaleSoldOut) != 1 || len(types) != before {
			t.Fatalf("events after the sell-out and 20 rejections: %v", types)
		}
		// An order cancelled: a unit back, sold again, sold out again.
		orders, _ := h.eng.Store.Orders(context.Background(), h.saleOf("pin").ID)
		if r := h.do("POST", "/admin/orders/"+orders[0].ID+"/cancel", map[string]string{"If-Match": "1"}, nil); r.status != http.StatusOK {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
		h.buy("pin", "u3")
		if got := count(h.events("pin"), flashsale.EventSaleSoldOut); got != 2 {
			t.Fatalf("%d sale.sold_out after selling out twice, want 2", got)
		}

		if r := h.do("POST", "/admin/sales/pin/pause", nil, map[string]string{"reason": "count check"}); r.status != http.StatusOK {
			t.Fatalf("pause: %d %s", r.status, r.body)
		}
		h.do("POST", "/admin/sales/pin/pause", nil, map[string]string{"reason": "again"})
		if r := h.do("POST", "/admin/sales/pin/resume", nil, nil); r.status != http.StatusOK {
			t.Fatalf("resume: %d %s", r.status, r.body)
		}
		evs, _ := h.eng.Store.SaleEvents(context.Background(), h.saleOf("pin").ID, 1000)
		paused, resumed := 0, 0
		for _, e := range evs {
			switch e.Type {
			case flashsale.EventSalePaused:
				paused++
				if !strings.Contains(string(e.Payload), `"reason":"count check"`) {
					t.Errorf("sale.paused payload %s, want the reason", e.Payload)
				}
			case flashsale.EventSaleResumed:
				resumed++
			}
		}
		if paused != 1 || resumed != 1 {
			t.Fatalf("%d sale.paused and %d sale.resumed, want 1 and 1", paused, resumed)
		}
	})
}

// capture is a sink that keeps what it was given.
type capture struct {
	mu  sync.Mutex
	ids map[string]flashsale.EventType
}

func (c *capture) Name() string { return "capture" }
func (c *capture) Publish(_ context.Context, evs []*flashsale.OutboxEvent) []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range evs {
		c.ids[e.ID] = e.Type
	}
	return nil
}

func (c *capture) types() map[flashsale.EventType]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[flashsale.EventType]int{}
	for _, t := range c.ids {
		out[t]++
	}
	return out
}

// TestRelayInTheEngine: the engine's relay, woken by the record's commits,
// publishes the sale's events (sale.opened from the warmer among them), and
// the operator's view shows the outbox drained.
func TestRelayInTheEngine(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		sink := &capture{ids: map[string]flashsale.EventType{}}
		h := newHarness(t, b, func(c *engine.Config) {
			c.Sink = sink
			c.RelayInterval = time.Hour // only the events hook can wake it
			c.WarmInterval = 10 * time.Millisecond
		})
		ctx, cancel := context.WithCancel(context.Background())
		h.eng.Start(ctx)
		defer func() { cancel(); h.eng.Stop() }()
		h.createSale("bag", map[string]any{"initialStock": 1})
		h.buy("bag", "alice")
		deadline := time.Now().Add(15 * time.Second)
		want := map[flashsale.EventType]int{flashsale.EventSaleOpened: 1, flashsale.EventReservationCreated: 1,
			flashsale.EventSaleSoldOut: 1, flashsale.EventOrderConfirmed: 1}
		for {
			got := sink.types()
			done := true
			for typ, n := range want {
				done = done && got[typ] == n
			}
			// Delivered, and marked so: the sale view shows nothing
			// waiting.
			ob := h.sale("bag").Outbox
			if done && ob != nil && ob.Pending == 0 && ob.Dead == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("within 15s the relay delivered %v (want %v) and the sale view shows %v", got, want, ob)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
