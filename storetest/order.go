package storetest

import (
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
)

func testOrdersOldestFirst(e *env) {
	t := e.t
	s := e.sale()
	var want []string
	byTime := map[time.Duration]string{}
	for i, d := range []time.Duration{3 * time.Minute, time.Minute, 2 * time.Minute} {
		r := e.hold(s, []string{"u-1", "u-2", "u-3"}[i])
		_, ord := e.confirm(r, t0.Add(d))
		byTime[d] = ord.ID
	}
	want = []string{byTime[time.Minute], byTime[2*time.Minute], byTime[3*time.Minute]}
	e.confirm(e.hold(e.sale(), "u-1"), t0) // another sale's order

	orders, err := e.store.Orders(e.ctx, s.ID)
	ok(t, "Orders", err)
	var got []string
	for _, o := range orders {
		got = append(got, o.ID)
		if o.SKU != s.SKU || o.SaleID != s.ID {
			t.Errorf("order %s: sale %s SKU %s, want %s %s", o.ID, o.SaleID, o.SKU, s.ID, s.SKU)
		}
	}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("Orders = %v, want oldest first %v", got, want)
	}

	none, err := e.store.Orders(e.ctx, "sale_missing")
	ok(t, "Orders(missing)", err)
	if len(none) != 0 {
		t.Errorf("Orders(missing) = %d orders", len(none))
	}
	_, err = e.store.Order(e.ctx, "ord_missing")
	wantIs(t, "Order(missing)", err, flashsale.ErrNotFound)
}

func testShipOrder(e *env) {
	t := e.t
	s := e.sale()
	_, ord := e.confirm(e.hold(s, "u-1"), t0.Add(time.Minute))
	at := t0.Add(time.Hour)

	shipped, restocked, err := e.store.ChangeOrder(e.ctx, ship(ord.ID, 1, at))
	ok(t, "ChangeOrder(shipped)", err)
	if restocked {
		t.Errorf("shipping restocked the order's units")
	}
	want := *ord
	want.State, want.Version, want.UpdatedAt = flashsale.OrderShipped, 2, at
	same(t, "shipped order", *shipped, want)
	got, err := e.store.Order(e.ctx, ord.ID)
	ok(t, "Order", err)
	same(t, "Order after shipping", *got, want)

	_, _, err = e.store.ChangeOrder(e.ctx, ship(ord.ID, 1, at.Add(time.Minute)))
	wantIs(t, "shipping at a stale version", err, flashsale.ErrVersionConflict)
	_, _, err = e.store.ChangeOrder(e.ctx, ship(ord.ID, 2, at.Add(time.Minute)))
	wantCode(t, "shipping a shipped order", err, flashsale.CodeInvalidState)
	_, _, err = e.store.ChangeOrder(e.ctx, ship("ord_missing", 1, at))
	wantIs(t, "shipping a missing order", err, flashsale.ErrNotFound)
	_, _, err = e.store.ChangeOrder(e.ctx, flashsale.OrderChange{OrderID: ord.ID, Version: 2, To: flashsale.OrderConfirmed, Actor: "op", At: at})
	wantCode(t, "moving an order back to confirmed", err, flashsale.CodeBadRequest)

	got, err = e.store.Order(e.ctx, ord.ID)
	ok(t, "Order", err)
	same(t, "Order after refused moves", *got, want)
	if r := e.reservation(ord.ReservationID); r.State != flashsale.ReservationConfirmed || !r.RestockedAt.IsZero() {
		t.Errorf("shipping changed the reservation: %+v", r)
	}
}

// ship is the operator's shipping of the order at version.
func ship(id string, version int64, at time.Time) flashsale.OrderChange {
	return flashsale.OrderChange{OrderID: id, Version: version, To: flashsale.OrderShipped, Actor: "operator", At: at}
}

// Cancelling an order ends its reservation (confirmed to cancelled,
// restocked_at set, confirmed_at kept) in the same transaction, and says so
// once: the caller restocks the gate only on that answer.
func testCancelOrder(e *env) {
	t := e.t
	s := e.sale()
	r := e.hold(s, "u-1", func(r *flashsale.Reservation) { r.Quantity = 2 })
	confirmedAt := t0.Add(time.Minute)
	_, ord := e.confirm(r, confirmedAt)
	at := t0.Add(time.Hour)

	c := flashsale.OrderChange{OrderID: ord.ID, Version: 1, To: flashsale.OrderCancelled, Actor: "operator", Reason: "fraud", At: at}
	cancelled, restocked, err := e.store.ChangeOrder(e.ctx, c)
	ok(t, "ChangeOrder(cancelled)", err)
	if !restocked {
		t.Errorf("cancelling a confirmed order did not restock its reservation")
	}
	want := *ord
	want.State, want.Version, want.UpdatedAt = flashsale.OrderCancelled, 2, at
	same(t, "cancelled order", *cancelled, want)

	res := e.reservation(r.ID)
	wantRes := flashsale.Reservation{
		ID: r.ID, SaleID: s.ID, SKU: s.SKU, UserID: "u-1", Quantity: 2, State: flashsale.ReservationCancelled,
		Epoch: 1, CreatedAt: t0, ExpiresAt: r.ExpiresAt, ConfirmedAt: confirmedAt, RestockedAt: at,
		OrderID: ord.ID, Version: 3,
	}
	same(t, "the order's reservation", *res, wantRes)
	totals, err := totalsOf(e, s.ID)
	ok(t, "SaleTotals", err)
	same(t, "SaleTotals", totals, flashsale.SaleTotals{Cancelled: 2})

	// The same request again is stale; at the new version it is refused
	// by state. Neither restocks.
	_, restocked, err = e.store.ChangeOrder(e.ctx, c)
	wantIs(t, "cancelling again at the old version", err, flashsale.ErrVersionConflict)
	if restocked {
		t.Errorf("a refused cancel restocked")
	}
	c.Version = 2
	_, _, err = e.store.ChangeOrder(e.ctx, c)
	wantCode(t, "cancelling a cancelled order", err, flashsale.CodeInvalidState)
	c.To = flashsale.OrderRefunded
	_, _, err = e.store.ChangeOrder(e.ctx, c)
	wantCode(t, "refunding a cancelled order", err, flashsale.CodeInvalidState)
	same(t, "the reservation after refused moves", *e.reservation(r.ID), wantRes)

	// The shopper may buy again: the live hold is gone.
	e.hold(s, "u-1")

	// A shipped order cannot be cancelled, only refunded.
	_, shippedOrd := e.confirm(e.hold(s, "u-2"), confirmedAt)
	_, _, err = e.store.ChangeOrder(e.ctx, ship(shippedOrd.ID, 1, at))
	ok(t, "ship", err)
	_, _, err = e.store.ChangeOrder(e.ctx, flashsale.OrderChange{OrderID: shippedOrd.ID, Version: 2, To: flashsale.OrderCancelled, Actor: "operator", At: at})
	wantCode(t, "cancelling a shipped order", err, flashsale.CodeInvalidState)
}

// A refund ends the reservation too, from confirmed or from shipped, and
// the audit trail records which.
func testRefundOrder(e *env) {
	t := e.t
	s := e.sale()
	at := t0.Add(time.Hour)
	for _, shipFirst := range []bool{false, true} {
		user := fmt.Sprintf("u-shipped-%t", shipFirst)
		r := e.hold(s, user)
		_, ord := e.confirm(r, t0.Add(time.Minute))
		version, from := int64(1), flashsale.OrderConfirmed
		if shipFirst {
			_, _, err := e.store.ChangeOrder(e.ctx, ship(ord.ID, 1, t0.Add(2*time.Minute)))
			ok(t, "ship", err)
			version, from = 2, flashsale.OrderShipped
		}
		refunded, restocked, err := e.store.ChangeOrder(e.ctx, flashsale.OrderChange{
			OrderID: ord.ID, Version: version, To: flashsale.OrderRefunded, Actor: "operator", Reason: "returned", At: at})
		ok(t, "ChangeOrder(refunded)", err)
		if !restocked || refunded.State != flashsale.OrderRefunded || refunded.Version != version+1 {
			t.Errorf("refund from %s: restocked %v, order %+v", from, restocked, refunded)
		}
		if res := e.reservation(r.ID); res.State != flashsale.ReservationCancelled || !res.RestockedAt.Equal(at) {
			t.Errorf("refund from %s left the reservation %s, restocked at %v", from, res.State, res.RestockedAt)
		}
		history := e.history(ord.ID)
		last := history[len(history)-1]
		if last.From != from || last.To != flashsale.OrderRefunded || last.Actor != "operator" || last.Reason != "returned" ||
			last.Version != version+1 || !last.At.Equal(at) {
			t.Errorf("refund from %s: audit row %+v", from, last)
		}
	}
}

// Every move of an order leaves an audit row, written with it, naming the
// event written with it.
func testOrderHistory(e *env) {
	t := e.t
	s := e.sale()
	_, ord := e.confirm(e.hold(s, "u-1"), t0.Add(time.Minute))
	_, _, err := e.store.ChangeOrder(e.ctx, ship(ord.ID, 1, t0.Add(2*time.Minute)))
	ok(t, "ship", err)
	_, _, err = e.store.ChangeOrder(e.ctx, flashsale.OrderChange{OrderID: ord.ID, Version: 2, To: flashsale.OrderRefunded,
		Actor: "operator:alice", Reason: "damaged", At: t0.Add(3 * time.Minute)})
	ok(t, "refund", err)

	history := e.history(ord.ID)
	want := []flashsale.OrderTransition{
		{OrderID: ord.ID, From: "", To: flashsale.OrderConfirmed, Actor: "shopper:u-1", Version: 1, At: t0.Add(time.Minute)},
		{OrderID: ord.ID, From: flashsale.OrderConfirmed, To: flashsale.OrderShipped, Actor: "operator", Version: 2, At: t0.Add(2 * time.Minute)},
		{OrderID: ord.ID, From: flashsale.OrderShipped, To: flashsale.OrderRefunded, Actor: "operator:alice", Reason: "damaged", Version: 3, At: t0.Add(3 * time.Minute)},
	}
	if len(history) != len(want) {
		t.Fatalf("OrderHistory = %d rows, want %d: %+v", len(history), len(want), history)
	}
	types := []flashsale.EventType{flashsale.EventOrderConfirmed, flashsale.EventOrderShipped, flashsale.EventOrderRefunded}
	for i := range want {
		got := history[i]
		ev, err := e.store.OutboxEvent(e.ctx, got.EventID)
		ok(t, "OutboxEvent of the audit row", err)
		if ev.Type != types[i] {
			t.Errorf("audit row %d names event %s of type %s, want %s", i, got.EventID, ev.Type, types[i])
		}
		got.EventID = ""
		same(t, fmt.Sprintf("audit row %d", i), got, want[i])
	}

	none, err := e.store.OrderHistory(e.ctx, "ord_missing")
	ok(t, "OrderHistory(missing)", err)
	if len(none) != 0 {
		t.Errorf("OrderHistory(missing) = %d rows", len(none))
	}
}

// A version conflict changes nothing: not the order, not its reservation,
// no audit row, no event.
func testOrderConflictChangesNothing(e *env) {
	t := e.t
	s := e.sale()
	r := e.hold(s, "u-1")
	_, ord := e.confirm(r, t0.Add(time.Minute))
	before := e.outbox(s.ID)
	resBefore := e.reservation(r.ID)

	for _, to := range []flashsale.OrderState{flashsale.OrderShipped, flashsale.OrderCancelled, flashsale.OrderRefunded} {
		_, restocked, err := e.store.ChangeOrder(e.ctx, flashsale.OrderChange{OrderID: ord.ID, Version: 7, To: to, Actor: "operator", At: t0.Add(time.Hour)})
		wantIs(t, "ChangeOrder at a stale version", err, flashsale.ErrVersionConflict)
		if restocked {
			t.Errorf("a stale %s restocked", to)
		}
	}
	got, err := e.store.Order(e.ctx, ord.ID)
	ok(t, "Order", err)
	same(t, "order after conflicts", *got, *ord)
	same(t, "reservation after conflicts", *e.reservation(r.ID), *resBefore)
	if h := e.history(ord.ID); len(h) != 1 {
		t.Errorf("audit rows after conflicts: %d, want only the confirm's", len(h))
	}
	if after := e.outbox(s.ID); len(after) != len(before) {
		t.Errorf("events after conflicts: %d, want %d", len(after), len(before))
	}
}

// The change, its audit row and its outbox row commit or roll back
// together: an order move whose audit row the schema refuses (no actor, a
// CHECK violation inside the transaction) leaves the order, its
// reservation, the audit trail and the outbox as they were.
func testOrderChangeAtomic(e *env) {
	t := e.t
	s := e.sale()
	r := e.hold(s, "u-1")
	_, ord := e.confirm(r, t0.Add(time.Minute))
	before := e.outbox(s.ID)
	resBefore := e.reservation(r.ID)

	for _, to := range []flashsale.OrderState{flashsale.OrderShipped, flashsale.OrderCancelled, flashsale.OrderRefunded} {
		_, restocked, err := e.store.ChangeOrder(e.ctx, flashsale.OrderChange{OrderID: ord.ID, Version: 1, To: to, Actor: "", At: t0.Add(time.Hour)})
		if err == nil || restocked {
			t.Fatalf("ChangeOrder(%s) without an actor = restocked %v, %v; want the schema to refuse it", to, restocked, err)
		}
	}
	got, err := e.store.Order(e.ctx, ord.ID)
	ok(t, "Order", err)
	same(t, "order after the failed moves", *got, *ord)
	same(t, "reservation after the failed moves", *e.reservation(r.ID), *resBefore)
	if h := e.history(ord.ID); len(h) != 1 {
		t.Errorf("audit rows after the failed moves: %d, want only the confirm's", len(h))
	}
	if after := e.outbox(s.ID); len(after) != len(before) {
		t.Errorf("events after the failed moves: %d, want %d", len(after), len(before))
	}
}
