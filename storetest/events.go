package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// history reads the order's audit rows, failing the test if it cannot.
func (e *env) history(orderID string) []flashsale.OrderTransition {
	e.t.Helper()
	h, err := e.store.OrderHistory(e.ctx, orderID)
	ok(e.t, "OrderHistory", err)
	return h
}

// outbox reads the sale's events, failing the test if it cannot.
func (e *env) outbox(saleID string) []*flashsale.OutboxEvent {
	e.t.Helper()
	evs, err := e.store.SaleEvents(e.ctx, saleID, 1000)
	ok(e.t, "SaleEvents", err)
	return evs
}

// ofType returns the events of the type.
func ofType(evs []*flashsale.OutboxEvent, typ flashsale.EventType) []*flashsale.OutboxEvent {
	var out []*flashsale.OutboxEvent
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// decode reads an event's envelope and its data, checking that the
// envelope agrees with the outbox row.
func decode[D any](t *testing.T, ev *flashsale.OutboxEvent) (flashsale.Envelope, D) {
	t.Helper()
	var (
		env  flashsale.Envelope
		data D
	)
	if err := json.Unmarshal(ev.Payload, &env); err != nil {
		t.Fatalf("event %s: payload %q: %v", ev.ID, ev.Payload, err)
	}
	if err := json.Unmarshal(env.Data, &data); err != nil {
		t.Fatalf("event %s: data %q: %v", ev.ID, env.Data, err)
	}
	if env.ID != ev.ID || env.Type != ev.Type || env.SaleID != ev.SaleID || !env.OccurredAt.Equal(ev.CreatedAt) {
		t.Errorf("event %s: envelope %+v disagrees with its row %+v", ev.ID, env, ev.Event)
	}
	if !ev.Pending() || ev.Attempts != 0 || !ev.NextAttemptAt.Equal(ev.CreatedAt) {
		t.Errorf("event %s is not a fresh pending event: %+v", ev.ID, ev)
	}
	return env, data
}

// one returns the only event of the type, failing the test unless there is
// exactly one.
func one(t *testing.T, evs []*flashsale.OutboxEvent, typ flashsale.EventType) *flashsale.OutboxEvent {
	t.Helper()
	got := ofType(evs, typ)
	if len(got) != 1 {
		t.Fatalf("%d %s events, want 1", len(got), typ)
	}
	return got[0]
}

// Every change of a hold writes its event in the same transaction: created,
// cancelled by the shopper, expired by the sweeper; and a confirm writes
// order.confirmed.
func testEventsOfHolds(e *env) {
	t := e.t
	s := e.sale()
	withSKU := func(r *flashsale.Reservation) { r.SKU = s.SKU; r.Quantity = 2 }
	kept := e.hold(s, "u-1", withSKU)
	dropped := e.hold(s, "u-2", withSKU)
	lapsed := e.hold(s, "u-3", withSKU, func(r *flashsale.Reservation) { r.ExpiresAt = t0.Add(time.Minute) })

	evs := e.outbox(s.ID)
	created := ofType(evs, flashsale.EventReservationCreated)
	if len(created) != 3 || len(evs) != 3 {
		t.Fatalf("after three holds: %d events, %d reservation.created; want 3 and 3", len(evs), len(created))
	}
	env, data := decode[flashsale.ReservationData](t, created[0])
	if env.SKU != s.SKU || !env.OccurredAt.Equal(t0) {
		t.Errorf("reservation.created envelope %+v, want SKU %s at %v", env, s.SKU, t0)
	}
	same(t, "reservation.created data", data, flashsale.ReservationData{
		ReservationID: kept.ID, UserID: "u-1", Quantity: 2, State: flashsale.ReservationPending, ExpiresAt: kept.ExpiresAt})

	e.cancel(dropped, t0.Add(10*time.Second))
	_, ord := e.confirm(kept, t0.Add(20*time.Second))
	expired, err := e.store.ExpireDue(e.ctx, t0.Add(time.Hour), 10)
	ok(t, "ExpireDue", err)
	if len(expired) != 1 {
		t.Fatalf("ExpireDue = %d holds, want 1", len(expired))
	}
	// A repeated cancel and confirm write nothing more.
	_, again, err := e.store.CancelReservation(e.ctx, dropped.ID, "u-2", t0.Add(30*time.Second))
	ok(t, "CancelReservation again", err)
	if again {
		t.Errorf("a repeated cancel restocked again")
	}
	e.confirm(kept, t0.Add(40*time.Second))

	evs = e.outbox(s.ID)
	if len(evs) != 6 {
		t.Errorf("%d events, want 6 (3 created, cancelled, confirmed, expired)", len(evs))
	}
	_, data = decode[flashsale.ReservationData](t, one(t, evs, flashsale.EventReservationCancelled))
	same(t, "reservation.cancelled data", data, flashsale.ReservationData{
		ReservationID: dropped.ID, UserID: "u-2", Quantity: 2, State: flashsale.ReservationCancelled,
		ExpiresAt: dropped.ExpiresAt, Cause: "shopper"})
	env, data = decode[flashsale.ReservationData](t, one(t, evs, flashsale.EventReservationExpired))
	if !env.OccurredAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("reservation.expired occurred at %v, want %v", env.OccurredAt, t0.Add(time.Hour))
	}
	same(t, "reservation.expired data", data, flashsale.ReservationData{
		ReservationID: lapsed.ID, UserID: "u-3", Quantity: 2, State: flashsale.ReservationExpired,
		ExpiresAt: lapsed.ExpiresAt, Cause: "expiry"})
	confirmed := one(t, evs, flashsale.EventOrderConfirmed)
	_, od := decode[flashsale.OrderData](t, confirmed)
	same(t, "order.confirmed data", od, flashsale.OrderData{
		OrderID: ord.ID, ReservationID: kept.ID, UserID: "u-1", Quantity: 2, To: flashsale.OrderConfirmed,
		Version: 1, Actor: "shopper:u-1"})
	if h := e.history(ord.ID); len(h) != 1 || h[0].EventID != confirmed.ID {
		t.Errorf("the confirm's audit row %+v does not name its event %s", h, confirmed.ID)
	}
}

// Moving an order writes its event; ending it writes its reservation's too.
func testEventsOfOrders(e *env) {
	t := e.t
	s := e.sale()
	r := e.hold(s, "u-1")
	_, ord := e.confirm(r, t0.Add(time.Minute))
	_, _, err := e.store.ChangeOrder(e.ctx, ship(ord.ID, 1, t0.Add(2*time.Minute)))
	ok(t, "ship", err)
	_, _, err = e.store.ChangeOrder(e.ctx, flashsale.OrderChange{OrderID: ord.ID, Version: 2, To: flashsale.OrderRefunded,
		Actor: "operator", Reason: "returned", At: t0.Add(3 * time.Minute)})
	ok(t, "refund", err)
	r2 := e.hold(s, "u-2")
	_, ord2 := e.confirm(r2, t0.Add(time.Minute))
	_, _, err = e.store.ChangeOrder(e.ctx, flashsale.OrderChange{OrderID: ord2.ID, Version: 1, To: flashsale.OrderCancelled,
		Actor: "operator", At: t0.Add(4 * time.Minute)})
	ok(t, "cancel", err)

	evs := e.outbox(s.ID)
	_, shipped := decode[flashsale.OrderData](t, one(t, evs, flashsale.EventOrderShipped))
	same(t, "order.shipped data", shipped, flashsale.OrderData{OrderID: ord.ID, ReservationID: r.ID, UserID: "u-1",
		Quantity: 1, From: flashsale.OrderConfirmed, To: flashsale.OrderShipped, Version: 2, Actor: "operator"})
	_, refunded := decode[flashsale.OrderData](t, one(t, evs, flashsale.EventOrderRefunded))
	same(t, "order.refunded data", refunded, flashsale.OrderData{OrderID: ord.ID, ReservationID: r.ID, UserID: "u-1",
		Quantity: 1, From: flashsale.OrderShipped, To: flashsale.OrderRefunded, Version: 3, Actor: "operator",
		Reason: "returned", Restocked: true})
	_, cancelled := decode[flashsale.OrderData](t, one(t, evs, flashsale.EventOrderCancelled))
	same(t, "order.cancelled data", cancelled, flashsale.OrderData{OrderID: ord2.ID, ReservationID: r2.ID, UserID: "u-2",
		Quantity: 1, From: flashsale.OrderConfirmed, To: flashsale.OrderCancelled, Version: 2, Actor: "operator", Restocked: true})
	ended := ofType(evs, flashsale.EventReservationCancelled)
	causes := map[string]string{}
	for _, ev := range ended {
		_, d := decode[flashsale.ReservationData](t, ev)
		causes[d.ReservationID] = d.Cause
	}
	if len(ended) != 2 || causes[r.ID] != "order.refunded" || causes[r2.ID] != "order.cancelled" {
		t.Errorf("reservation.cancelled events: %v, want %s by order.refunded and %s by order.cancelled", causes, r.ID, r2.ID)
	}
}

// CreateReservation writes the events it is given with the hold, in the
// same statement, skipping ids the outbox has; a hold it refuses writes
// none.
func testEventsWithAHold(e *env) {
	t := e.t
	s := e.sale()
	r := newHold(s, "u-1")
	soldOut := flashsale.SaleSoldOutEvent(s, r.ID, t0)
	ok(t, "CreateReservation with sale.sold_out", e.store.CreateReservation(e.ctx, r, soldOut))
	evs := e.outbox(s.ID)
	_, d := decode[flashsale.SaleData](t, one(t, evs, flashsale.EventSaleSoldOut))
	if d.ReservationID != r.ID || d.State != flashsale.SaleSoldOut {
		t.Errorf("sale.sold_out data %+v", d)
	}

	// The same event again, with another hold: one row.
	ok(t, "CreateReservation with the same event", e.store.CreateReservation(e.ctx, newHold(s, "u-2"), soldOut))
	if got := len(ofType(e.outbox(s.ID), flashsale.EventSaleSoldOut)); got != 1 {
		t.Errorf("%d sale.sold_out events after writing one id twice, want 1", got)
	}

	// Refused holds write nothing, not even the events they carry.
	before := len(e.outbox(s.ID))
	dup := newHold(s, "u-1")
	err := e.store.CreateReservation(e.ctx, dup, flashsale.SaleSoldOutEvent(s, dup.ID, t0))
	wantIs(t, "a second live hold", err, flashsale.ErrDuplicate)
	stale := newHold(s, "u-3")
	stale.Epoch = 7
	err = e.store.CreateReservation(e.ctx, stale, flashsale.SaleSoldOutEvent(s, stale.ID, t0))
	wantIs(t, "a hold of a stale epoch", err, flashsale.ErrStaleEpoch)
	if after := len(e.outbox(s.ID)); after != before {
		t.Errorf("refused holds wrote %d events", after-before)
	}
}

// A sale's moves publish what happened; a non-move publishes nothing.
func testEventsOfSales(e *env) {
	t := e.t
	s := e.sale()
	_, err := e.store.SetSaleState(e.ctx, s.ID, flashsale.SalePaused, "the stock gate is unreachable", t0.Add(time.Minute))
	ok(t, "pause", err)
	again, err := e.store.SetSaleState(e.ctx, s.ID, flashsale.SalePaused, "a second reason", t0.Add(2*time.Minute))
	ok(t, "pause again", err)
	if again.PauseReason != "the stock gate is unreachable" || again.Version != 2 {
		t.Errorf("pausing a paused sale changed it: reason %q version %d", again.PauseReason, again.Version)
	}
	_, err = e.store.SetSaleState(e.ctx, s.ID, flashsale.SaleOpen, "", t0.Add(3*time.Minute))
	ok(t, "resume", err)
	_, err = e.store.SetSaleState(e.ctx, s.ID, flashsale.SaleClosed, "", t0.Add(4*time.Minute))
	ok(t, "close", err)

	evs := e.outbox(s.ID)
	var types []flashsale.EventType
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	if fmt.Sprint(types) != fmt.Sprint([]flashsale.EventType{flashsale.EventSalePaused, flashsale.EventSaleResumed, flashsale.EventSaleClosed}) {
		t.Fatalf("sale events %v, want paused, resumed, closed", types)
	}
	env, d := decode[flashsale.SaleData](t, evs[0])
	if env.SKU != s.SKU || d.Reason != "the stock gate is unreachable" || d.State != flashsale.SalePaused || !env.OccurredAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("sale.paused %+v %+v", env, d)
	}
}

// AppendEvents writes an id once, however many servers report it.
func testAppendEvents(e *env) {
	t := e.t
	s := e.sale()
	opened := flashsale.SaleOpenedEvent(s)
	n, err := e.store.AppendEvents(e.ctx, opened)
	ok(t, "AppendEvents", err)
	m, err := e.store.AppendEvents(e.ctx, flashsale.SaleOpenedEvent(s), flashsale.SaleOpenedEvent(s))
	ok(t, "AppendEvents again", err)
	if n != 1 || m != 0 {
		t.Errorf("AppendEvents wrote %d then %d, want 1 then 0", n, m)
	}
	got, err := e.store.OutboxEvent(e.ctx, opened.ID)
	ok(t, "OutboxEvent", err)
	if string(got.Payload) != string(opened.Payload) {
		t.Errorf("stored payload %s, want the bytes written %s", got.Payload, opened.Payload)
	}
	_, err = e.store.OutboxEvent(e.ctx, "evt_missing")
	wantIs(t, "OutboxEvent(missing)", err, flashsale.ErrNotFound)
}

// With the outbox refusing an event type (a fault the engine's test
// injects inside the transaction), the change that writes it rolls back
// whole: the change, its audit row and its outbox row land together or not
// at all.
func testEventsRollBackWithTheChange(e *env) {
	t := e.t
	if e.faults.BreakOutbox == nil {
		t.Skip("the engine gave no way to make the outbox fail")
	}
	s := e.sale()
	r := e.hold(s, "u-1")
	_, ord := e.confirm(r, t0.Add(time.Minute))
	lapsing := e.hold(s, "u-2", func(r *flashsale.Reservation) { r.ExpiresAt = t0.Add(time.Minute) })
	unpaid := e.hold(s, "u-3")
	before := e.outbox(s.ID)
	for _, typ := range []flashsale.EventType{
		flashsale.EventOrderShipped, flashsale.EventOrderCancelled, flashsale.EventReservationCreated,
		flashsale.EventReservationExpired, flashsale.EventOrderConfirmed, flashsale.EventSalePaused,
	} {
		e.faults.BreakOutbox(t, e.store, typ)
	}

	_, _, err := e.store.ChangeOrder(e.ctx, ship(ord.ID, 1, t0.Add(time.Hour)))
	if err == nil {
		t.Fatal("shipping succeeded with its event refused")
	}
	_, restocked, err := e.store.ChangeOrder(e.ctx, flashsale.OrderChange{OrderID: ord.ID, Version: 1, To: flashsale.OrderCancelled, Actor: "operator", At: t0.Add(time.Hour)})
	if err == nil || restocked {
		t.Fatalf("cancelling succeeded with its event refused: restocked %v, %v", restocked, err)
	}
	got, err := e.store.Order(e.ctx, ord.ID)
	ok(t, "Order", err)
	same(t, "order after the failed moves", *got, *ord)
	if res := e.reservation(r.ID); res.State != flashsale.ReservationConfirmed || !res.RestockedAt.IsZero() {
		t.Errorf("the failed cancel ended the reservation: %+v", res)
	}
	if h := e.history(ord.ID); len(h) != 1 {
		t.Errorf("audit rows after the failed moves: %+v", h)
	}

	fresh := newHold(s, "u-4")
	if err := e.store.CreateReservation(e.ctx, fresh); err == nil {
		t.Errorf("a hold was recorded with its event refused")
	}
	if _, err := e.store.Reservation(e.ctx, fresh.ID); !errors.Is(err, flashsale.ErrNotFound) {
		t.Errorf("the refused hold is in the record: %v", err)
	}
	if _, err := e.store.ExpireDue(e.ctx, t0.Add(2*time.Minute), 10); err == nil {
		t.Errorf("holds expired with their events refused")
	}
	if res := e.reservation(lapsing.ID); res.State != flashsale.ReservationPending || !res.RestockedAt.IsZero() {
		t.Errorf("the failed expiry ended the hold: %+v", res)
	}
	if _, _, err := e.store.ConfirmReservation(e.ctx, unpaid.ID, "u-3", "pay", t0.Add(time.Minute)); err == nil {
		t.Errorf("a confirm succeeded with its event refused")
	}
	if res := e.reservation(unpaid.ID); res.State != flashsale.ReservationPending || res.OrderID != "" {
		t.Errorf("the failed confirm changed the hold: %+v", res)
	}
	if _, err := e.store.SetSaleState(e.ctx, s.ID, flashsale.SalePaused, "x", t0); err == nil {
		t.Errorf("a pause succeeded with its event refused")
	}
	if cur, err := e.store.Sale(e.ctx, s.ID); err != nil || cur.State != flashsale.SaleOpen {
		t.Errorf("the failed pause changed the sale: %+v, %v", cur, err)
	}
	if after := e.outbox(s.ID); len(after) != len(before) {
		t.Errorf("%d events after the failed changes, want %d", len(after), len(before))
	}
}
