package storetest

import (
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

	shipped, err := e.store.ShipOrder(e.ctx, ord.ID, 1, at)
	ok(t, "ShipOrder", err)
	want := *ord
	want.State, want.Version, want.UpdatedAt = flashsale.OrderShipped, 2, at
	same(t, "shipped order", *shipped, want)
	got, err := e.store.Order(e.ctx, ord.ID)
	ok(t, "Order", err)
	same(t, "Order after ShipOrder", *got, want)

	_, err = e.store.ShipOrder(e.ctx, ord.ID, 1, at.Add(time.Minute))
	wantIs(t, "ShipOrder at a stale version", err, flashsale.ErrVersionConflict)
	_, err = e.store.ShipOrder(e.ctx, ord.ID, 2, at.Add(time.Minute))
	wantCode(t, "ShipOrder of a shipped order", err, flashsale.CodeInvalidState)
	_, err = e.store.ShipOrder(e.ctx, "ord_missing", 1, at)
	wantIs(t, "ShipOrder(missing)", err, flashsale.ErrNotFound)

	got, err = e.store.Order(e.ctx, ord.ID)
	ok(t, "Order", err)
	same(t, "Order after refused ships", *got, want)
}
