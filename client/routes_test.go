package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/client"
	"github.com/flashsale/flashsale/engine"
)

func ptr[T any](v T) *T { return &v }

// TestEveryRoute drives every route on main through the client against a
// real server, and checks the typed answers.
func TestEveryRoute(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b, func(c *engine.Config) { c.Demo = true })
		ctx := context.Background()
		adm := h.admin()

		// Plumbing.
		if hz, err := h.c.Healthz(ctx); err != nil || hz["status"] != "ok" {
			t.Fatalf("healthz: %v %v", hz, err)
		}
		if rz, err := h.c.Readyz(ctx); err != nil || rz["record"] != "ok" || rz["gate"] != "ok" {
			t.Fatalf("readyz: %v %v", rz, err)
		}

		// Create, list, show, the public view, PATCH with If-Match.
		created := h.createSale("shoe", func(s *client.NewSale) {
			s.InitialStock, s.PerUserLimit, s.HoldSeconds = 5, 2, 60
			s.ClosesAt = start.Add(24 * time.Hour)
		})
		if created.SaleID == "" || created.Version < 1 || created.InitialStock != 5 || created.PerUserLimit != 2 ||
			created.HoldSeconds != 60 || created.Fairness != flashsale.FairnessFIFO || created.ClosesAt == nil ||
			!created.ClosesAt.Equal(start.Add(24*time.Hour)) {
			t.Fatalf("created: %+v", created)
		}
		list, err := adm.Sales(ctx)
		if err != nil || len(list) != 1 || list[0].SKU != "shoe" {
			t.Fatalf("sales: %+v %v", list, err)
		}
		shown, err := adm.Sale(ctx, "shoe")
		if err != nil || shown.SaleID != created.SaleID || shown.Version != created.Version || !shown.Invariant.OK {
			t.Fatalf("show: %+v %v", shown, err)
		}
		pub, err := h.c.Sale(ctx, "shoe")
		if err != nil || pub.State != flashsale.SaleOpen || pub.Policy.PerUserLimit != 2 || pub.Policy.HoldSeconds != 60 ||
			pub.Policy.Fairness != flashsale.FairnessFIFO || pub.Policy.Challenge || pub.AutomationPolicy == "" {
			t.Fatalf("public sale: %+v %v", pub, err)
		}
		patched, err := adm.UpdateSale(ctx, "shoe", shown.Version, client.SalePatch{Name: ptr("Shoe, renamed")})
		if err != nil || patched.Name != "Shoe, renamed" || patched.Version <= shown.Version {
			t.Fatalf("patch: %+v %v", patched, err)
		}
		_, err = adm.UpdateSale(ctx, "shoe", shown.Version, client.SalePatch{Name: ptr("lost update")})
		wantCode(t, "patch at a stale version", err, client.ErrVersionConflict, 412)

		// A demo server's shopper token takes a place like any other.
		dt, err := h.c.DemoToken(ctx, "ann")
		if err != nil || dt.User != "ann" || dt.Token == "" || dt.ExpiresIn <= 0 {
			t.Fatalf("demo token: %+v %v", dt, err)
		}
		if _, err := h.c.Shopper(dt.Token).Ticket(ctx, "shoe"); err != nil {
			t.Fatalf("ticket with the demo token: %v", err)
		}

		// The shopper's path: ticket, status, reserve (and its replay),
		// the reservation, confirm (twice).
		alice := h.shopper("alice")
		tk, err := alice.Ticket(ctx, "shoe")
		if err != nil || tk.Token == "" {
			t.Fatalf("ticket: %+v %v", tk, err)
		}
		st, err := h.c.Status(ctx, "shoe", tk.Token)
		if err != nil || st.State != client.StateAdmitted || st.AdmissionToken == "" || st.ExpiresIn != 120 {
			t.Fatalf("status: %+v %v", st, err)
		}
		res, err := alice.Reserve(ctx, "shoe", client.ReserveRequest{AdmissionToken: st.AdmissionToken, IdempotencyKey: "a1", Quantity: 2})
		if err != nil || res.ReservationID == "" || res.Quantity != 2 || !res.ExpiresAt.Equal(start.Add(time.Minute)) ||
			res.IdempotencyKey != "a1" {
			t.Fatalf("reserve: %+v %v", res, err)
		}
		again, err := alice.Reserve(ctx, "shoe", client.ReserveRequest{AdmissionToken: st.AdmissionToken, IdempotencyKey: "a1", Quantity: 2})
		if err != nil || again.ReservationID != res.ReservationID {
			t.Fatalf("the same key again: %+v %v, want %s replayed", again, err, res.ReservationID)
		}
		got, err := alice.Reservation(ctx, res.ReservationID)
		if err != nil || got.State != flashsale.ReservationPending || got.SKU != "shoe" || got.Quantity != 2 ||
			got.ExpiresIn == nil || *got.ExpiresIn != 60 {
			t.Fatalf("reservation: %+v %v", got, err)
		}
		orderID, err := alice.Confirm(ctx, res.ReservationID, "pay-1")
		if err != nil || orderID == "" {
			t.Fatalf("confirm: %q %v", orderID, err)
		}
		if again, err := alice.Confirm(ctx, res.ReservationID, "pay-1"); err != nil || again != orderID {
			t.Fatalf("confirm again: %q %v, want %q", again, err, orderID)
		}
		if got, err := alice.Reservation(ctx, res.ReservationID); err != nil || got.State != flashsale.ReservationConfirmed ||
			got.OrderID != orderID {
			t.Fatalf("confirmed reservation: %+v %v", got, err)
		}

		// A reservation cancelled, twice; a second order for the operator.
		bob := h.shopper("bob")
		bres, err := bob.Reserve(ctx, "shoe", client.ReserveRequest{AdmissionToken: h.admit("shoe", "bob")})
		if err != nil || bres.Quantity != 1 || bres.IdempotencyKey == "" {
			t.Fatalf("bob's reserve: %+v %v", bres, err)
		}
		for i := 0; i < 2; i++ {
			if state, err := bob.Cancel(ctx, bres.ReservationID); err != nil || state != flashsale.ReservationCancelled {
				t.Fatalf("cancel %d: %q %v", i, state, err)
			}
		}
		carol := h.shopper("carol")
		cres, err := carol.Reserve(ctx, "shoe", client.ReserveRequest{AdmissionToken: h.admit("shoe", "carol")})
		if err != nil {
			t.Fatal(err)
		}
		carolOrder, err := carol.Confirm(ctx, cres.ReservationID, "pay-2")
		if err != nil {
			t.Fatal(err)
		}

		// Orders: list, ship (named operator), refund, cancel, history.
		orders, err := adm.Orders(ctx, "shoe")
		if err != nil || len(orders) != 2 {
			t.Fatalf("orders: %+v %v", orders, err)
		}
		byID := map[string]client.Order{}
		for _, o := range orders {
			byID[o.OrderID] = o
		}
		ao := byID[orderID]
		if ao.UserID != "alice" || ao.Quantity != 2 || ao.State != flashsale.OrderConfirmed || ao.ReservationID != res.ReservationID {
			t.Fatalf("alice's order: %+v", ao)
		}
		shipped, err := adm.WithOperator("olga").Ship(ctx, orderID, ao.Version, "")
		if err != nil || shipped.State != flashsale.OrderShipped || shipped.Version != ao.Version+1 {
			t.Fatalf("ship: %+v %v", shipped, err)
		}
		_, err = adm.Ship(ctx, orderID, ao.Version, "")
		wantCode(t, "ship at a stale version", err, client.ErrVersionConflict, 412)
		refunded, err := adm.Refund(ctx, orderID, shipped.Version, "returned")
		if err != nil || refunded.State != flashsale.OrderRefunded {
			t.Fatalf("refund: %+v %v", refunded, err)
		}
		co := byID[carolOrder]
		cancelled, err := adm.CancelOrder(ctx, carolOrder, co.Version, "fraud check")
		if err != nil || cancelled.State != flashsale.OrderCancelled {
			t.Fatalf("cancel order: %+v %v", cancelled, err)
		}
		_, err = adm.CancelOrder(ctx, carolOrder, cancelled.Version, "")
		wantCode(t, "cancel a cancelled order", err, client.ErrInvalidState, 409)
		hist, err := adm.OrderHistory(ctx, orderID)
		if err != nil || hist.Order.OrderID != orderID || len(hist.History) != 3 {
			t.Fatalf("history: %+v %v", hist, err)
		}
		if ship := hist.History[1]; ship.From != flashsale.OrderConfirmed || ship.To != flashsale.OrderShipped ||
			ship.Actor != "operator:olga" || ship.EventID == "" {
			t.Fatalf("the ship in the history: %+v", ship)
		}
		if refund := hist.History[2]; refund.To != flashsale.OrderRefunded || refund.Reason != "returned" || refund.Actor != "operator" {
			t.Fatalf("the refund in the history: %+v", refund)
		}

		// Events and the outbox (no relay runs: the events wait).
		evs, err := adm.SaleEvents(ctx, "shoe", 100)
		if err != nil || len(evs) == 0 {
			t.Fatalf("sale events: %v %v", evs, err)
		}
		types := map[flashsale.EventType]bool{}
		for _, e := range evs {
			types[e.Type] = true
			if e.EventID == "" || e.SaleID != created.SaleID || !json.Valid(e.Payload) {
				t.Fatalf("event: %+v", e)
			}
		}
		for _, want := range []flashsale.EventType{flashsale.EventReservationCreated, flashsale.EventOrderConfirmed,
			flashsale.EventOrderShipped, flashsale.EventOrderRefunded, flashsale.EventOrderCancelled} {
			if !types[want] {
				t.Errorf("no %s among the sale's events %v", want, types)
			}
		}
		if ob, err := adm.Outbox(ctx); err != nil || ob.Pending < int64(len(evs)) || ob.OldestPendingAt == nil {
			t.Fatalf("outbox: %+v %v", ob, err)
		}
		if dead, err := adm.DeadEvents(ctx, 10); err != nil || len(dead) != 0 {
			t.Fatalf("dead letters: %+v %v", dead, err)
		}
		_, err = adm.Replay(ctx, "evt_nope")
		wantCode(t, "replay an unknown event", err, client.ErrNotFound, 404)
		_, err = adm.Replay(ctx, evs[0].EventID)
		wantCode(t, "replay a pending event", err, client.ErrInvalidState, 409)

		// The gate's audit log and the automation audit.
		log, err := adm.Audit(ctx, "shoe", 50)
		if err != nil || log.SKU != "shoe" || len(log.Entries) == 0 {
			t.Fatalf("audit: %+v %v", log, err)
		}
		if rep, err := adm.Automation(ctx, "shoe"); err != nil || rep.SKU != "shoe" || rep.Policy == "" {
			t.Fatalf("automation: %+v %v", rep, err)
		}
		if rep, err := adm.CancelAutomation(ctx, "shoe"); err != nil || rep.SKU != "shoe" || rep.Cancelled != 0 {
			t.Fatalf("automation cancel: %+v %v", rep, err)
		}

		// Pause (a reserve is told so, and not repeated), rebuild, resume.
		daveAdm := h.admit("shoe", "dave")
		paused, err := adm.Pause(ctx, "shoe", "stocktake")
		if err != nil || paused.State != flashsale.SalePaused || paused.PauseReason != "stocktake" {
			t.Fatalf("pause: %+v %v", paused, err)
		}
		h.waits()
		_, err = h.shopper("dave").Reserve(ctx, "shoe", client.ReserveRequest{AdmissionToken: daveAdm})
		wantCode(t, "reserve while paused", err, client.ErrSalePaused, 503)
		if e := (*client.Error)(nil); !errors.As(err, &e) || e.RetryAfter <= 0 {
			t.Fatalf("a paused sale's answer has no Retry-After: %#v", err)
		}
		if w := h.waits(); len(w) != 0 {
			t.Fatalf("a paused sale's answer was repeated after %v", w)
		}
		if _, err := adm.Rebuild(ctx, "shoe"); err != nil {
			t.Fatalf("rebuild: %v", err)
		}
		if v, err := adm.Resume(ctx, "shoe"); err != nil || v.State != flashsale.SaleOpen {
			t.Fatalf("resume: %+v %v", v, err)
		}
		_, err = adm.Rebuild(ctx, "shoe")
		wantCode(t, "rebuild an open sale", err, client.ErrNotPaused, 409)

		// What edges fetch, and the metrics.
		raw, err := adm.EdgeSnapshots(ctx, "shoe", "")
		if err != nil || !strings.Contains(string(raw), `"sales"`) {
			t.Fatalf("edge snapshots: %s %v", raw, err)
		}
		m, err := adm.Metrics(ctx)
		if err != nil || !strings.Contains(string(m), "flashsale_http_requests_total") {
			t.Fatalf("metrics: %d bytes, %v", len(m), err)
		}
	})
}

// TestConcurrentShoppers: one Client shared by many goroutines, each a
// shopper through ticket, Waiter and reserve: exactly the stock is sold,
// everyone else is told sold out, and no answer is confused with another's.
func TestConcurrentShoppers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		ctx := context.Background()
		h.createSale("rush", func(s *client.NewSale) { s.InitialStock = 10 })
		const shoppers = 40
		var wg sync.WaitGroup
		results := make([]error, shoppers)
		ids := make([]string, shoppers)
		for i := range shoppers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sh := h.shopper(fmt.Sprint("s-", i))
				tk, err := sh.Ticket(ctx, "rush")
				if err != nil {
					results[i] = err
					return
				}
				st, err := (&client.Waiter{Client: h.c, SKU: "rush"}).Wait(ctx, tk.Token)
				switch {
				case err != nil:
					results[i] = err
					return
				case st.State == client.StateSoldOut:
					results[i] = client.ErrSoldOut
					return
				case st.State != client.StateAdmitted:
					results[i] = fmt.Errorf("state %s", st.State)
					return
				}
				res, err := sh.Reserve(ctx, "rush", client.ReserveRequest{AdmissionToken: st.AdmissionToken})
				if err == nil {
					ids[i] = res.ReservationID
				}
				results[i] = err
			}()
		}
		wg.Wait()
		sold := map[string]bool{}
		for i, err := range results {
			switch {
			case err == nil:
				if sold[ids[i]] {
					t.Fatalf("reservation %s answered twice", ids[i])
				}
				sold[ids[i]] = true
			case errors.Is(err, client.ErrSoldOut):
			default:
				t.Fatalf("shopper %d: %v", i, err)
			}
		}
		if len(sold) != 10 {
			t.Fatalf("%d sold of 10", len(sold))
		}
		if v, err := h.admin().Sale(ctx, "rush"); err != nil || v.Pending != 10 || *v.Counter != 0 {
			t.Fatalf("after the rush: %+v %v", v, err)
		}
	})
}
